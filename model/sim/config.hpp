// Named, typed, range-checked configuration parameters. Every tunable of the
// model is declared once (key, type, unit, default, allowed range, source) by
// the block that uses it; presets and command-line overrides can only set
// declared keys, and a bad key or value is an error that names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace hcasim::sim {

class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// s with every byte a terminal would hide or garble (control bytes, DEL,
// bytes of 0x80 and above) written as \xNN, for error messages that quote
// user input.
std::string printable(const std::string& s);

struct ParamSpec {
    enum class Kind { Int, Real, Bool, Choice, Text };
    std::string key;          // "pcie.lanes"
    Kind kind = Kind::Int;
    std::string unit;         // "lanes", "ns", "cycles", "bytes", ...
    std::string default_value;
    double min = 0;           // Int and Real: inclusive range
    double max = 0;
    std::vector<std::string> choices;  // Choice: allowed words; Int: if set, allowed values
    std::string doc;          // what it is
    std::string source;       // where the default comes from
    // Text: each assignment adds one comma-separated entry instead of
    // replacing the value.
    bool list = false;
    // A node may have a value of its own ("node1.pcie.lanes"): a property of
    // one host and its adapter (its bus, clocks, caches, CPU costs), not of
    // the fabric (links, switch, subnet manager) nor a device limit that
    // programs and workloads size themselves by.
    bool per_node = false;
    // A key with a '*' names a family: "fault.*.drop" stands for every key
    // with that start and end and at least one character in place of '*'.
    bool is_pattern() const { return key.find('*') != std::string::npos; }
    bool matches(const std::string& k) const;
};

class ParamRegistry {
public:
    void add(ParamSpec spec);
    // add() for a key each node may set for itself (ParamSpec::per_node).
    void add_per_node(ParamSpec spec);
    const ParamSpec* find(const std::string& key) const;
    const std::vector<ParamSpec>& all() const { return m_specs; }

private:
    std::vector<ParamSpec> m_specs;
    std::map<std::string, std::size_t> m_index;
    std::vector<std::size_t> m_patterns;
};

// Every declared parameter: the declarations of each block linked into the
// program (see ParamDeclarations), built on the first call.
const ParamRegistry& parameters();

// Where a block's declarations appear in parameters() (the params listing,
// the overrides in reports): layer by layer, upwards, then by the block's
// rank within its layer; equal ranks go by name.
namespace param_rank {
constexpr int kSim = 0;
constexpr int kModel = 1000;
constexpr int kFirmware = 2000;
constexpr int kHost = 3000;
constexpr int kTestbench = 4000;
}  // namespace param_rank

// A block's parameter declarations, added to parameters() by one static
// object in the block's .cpp:
//
//   const sim::ParamDeclarations kParams{sim::param_rank::kModel + 10, "pcie", declare_pcie_params};
//
// The object file must be linked whole (each layer's library is linked as a
// whole archive, see CMakeLists.txt) and constructed before the first call
// of parameters(): a declaration that comes later is a fatal error naming it.
class ParamDeclarations {
public:
    using Declare = void (*)(ParamRegistry&);
    ParamDeclarations(int rank, const char* name, Declare declare);
};

class Config {
public:
    // Defaults of every declared parameter.
    Config();

    // Sets key to value after checking both; throws ConfigError naming the key
    // and the allowed range or choices. "nodeN.KEY" sets a per-node KEY for
    // node N alone; the other nodes keep the class-wide value.
    // "nodeN.preset" = NAME makes node N an adapter of preset NAME: for every
    // per-node key that NAME or the class-wide preset sets, node N takes NAME's
    // value (the default where NAME leaves the key unset). Other keys follow
    // the class-wide value; the preset's fabric-wide keys (its link, its
    // device limits) are not taken, since one fabric has one of each, and the
    // reports name them. As for any key, the last assignment wins: a
    // nodeN.KEY after the preset, or a later preset of the node, which
    // replaces all the earlier one gave.
    void set(const std::string& key, const std::string& value);
    // "key=value".
    void set_assignment(const std::string& assignment);
    // INI file: "[section]" then "name = value" gives key "section.name";
    // '#' starts a comment anywhere, ';' at the start of a line. A leading
    // UTF-8 byte order mark is skipped. Only a regular file of at most
    // kMaxFileBytes is read (a directory, FIFO or device is refused unopened).
    void load_file(const std::string& path);
    static constexpr std::size_t kMaxFileBytes = 1 << 20;
    // A preset by name from the presets folder, or a path. The keys it sets
    // are those a node preset (nodeN.preset) takes again from its own preset.
    void load_preset(const std::string& name_or_path);

    std::int64_t get_int(const std::string& key) const;
    double get_real(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    const std::string& get_choice(const std::string& key) const;
    const std::string& get_text(const std::string& key) const;
    const std::string& raw(const std::string& key) const;
    // Whether key was assigned (a family's key has no value until it is).
    bool has(const std::string& key) const { return m_values.count(key) != 0; }

    // The keys set away from their defaults, in key order, then each node's
    // own values as "nodeN.KEY", node by node (for reports).
    std::vector<std::pair<std::string, std::string>> overrides() const;
    const std::map<std::string, std::string>& values() const { return m_values; }

    // The configuration node `node` is built from: the class-wide values
    // with that node's own ones in their place.
    Config for_node(int node) const;
    // Whether some node has a value of its own for key.
    bool any_node_sets(const std::string& key) const;
    // The highest N of the "nodeN." keys set, or -1 when none is.
    int highest_node() const { return m_node_values.empty() ? -1 : m_node_values.rbegin()->first; }
    // "node3.pcie.lanes": node = 3 and "pcie.lanes"; any other key as it is,
    // with node = -1.
    static std::string own_key(const std::string& key, int& node);
    // The preset node N was given with nodeN.preset, or "" when none.
    std::string node_preset(int node) const;
    // Largest N a "nodeN." key may name: the most nodes a fabric has, less one.
    static constexpr int kMaxNode = 647;

    static std::string presets_dir();
    static std::vector<std::string> preset_names();

private:
    // A node's preset: its name, the per-node keys it gave the node (a key
    // the node then sets itself is the node's own and leaves this set), and
    // the fabric-wide keys it sets but cannot give one node.
    struct NodePreset {
        std::string name;
        std::set<std::string> keys;
        std::vector<std::pair<std::string, std::string>> fabric_wide;
    };
    // The file of a preset name, or the path itself.
    static std::string preset_path(const std::string& name_or_path);
    // Each "name = value" of an INI file as assign(key, value), in order; an
    // error thrown by assign gets the file and line in front.
    static void read_ini(const std::string& path,
                         const std::function<void(const std::string&, const std::string&)>& assign);
    void apply_node_preset(int node, const std::string& name_or_path);
    const ParamSpec& spec(const std::string& key) const;
    // key's value, or its spec's default when it has none yet.
    const std::string& value(const std::string& key, const ParamSpec& s) const;
    // value checked against s (key names it in errors) and written in its
    // canonical form into slot, which holds the current value.
    static void assign(const ParamSpec& s, const std::string& key, const std::string& value, std::string& slot);
    std::map<std::string, std::string> m_values;
    std::map<int, std::map<std::string, std::string>> m_node_values;  // node -> key -> its own value
    std::set<std::string> m_preset_keys;                               // keys the class-wide preset set
    std::map<int, NodePreset> m_node_presets;
};

}  // namespace hcasim::sim
