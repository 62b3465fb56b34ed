#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

// libsystemc refers to sc_main; the tests build their systems in child
// processes (run_isolated) and never call it.
extern "C" int sc_main(int, char**) { return 0; }

int main(int argc, char** argv) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
    return Catch::Session().run(argc, argv);
}
