// The field access every MAD codec shares: a message's fields are listed
// once, in a template over the direction, and Writer puts them into the MAD
// while Reader takes them out. Offsets are bytes from the start of the
// area the IO object was given; bit 0 is the most significant bit of its
// byte, as the IBA tables number them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace hcasim::packet::mad {

using Gid = std::array<std::uint8_t, 16>;

class Writer {
public:
    explicit Writer(std::uint8_t* data) : m_d(data) {}
    template <typename T>
    void bits(std::size_t byte, unsigned bit, unsigned width, const T& v) {
        const auto x = static_cast<std::uint64_t>(v);
        for (unsigned i = 0; i < width; ++i) {
            const std::size_t pos = bit + i;
            const std::uint8_t mask = static_cast<std::uint8_t>(0x80u >> (pos % 8));
            std::uint8_t& b = m_d[byte + pos / 8];
            if ((x >> (width - 1 - i)) & 1) b |= mask;
            else b &= static_cast<std::uint8_t>(~mask);
        }
    }
    void area(std::size_t byte, std::size_t size, const std::vector<std::uint8_t>& v) {
        std::memset(m_d + byte, 0, size);
        if (!v.empty()) std::memcpy(m_d + byte, v.data(), v.size());
    }
    void gid(std::size_t byte, const Gid& g) { std::memcpy(m_d + byte, g.data(), g.size()); }
    // An area of up to max bytes whose length is a field of its own.
    void counted(std::size_t len_byte, unsigned len_bit, unsigned len_width, std::size_t at, std::size_t max,
                 const std::vector<std::uint8_t>& v) {
        bits(len_byte, len_bit, len_width, v.size());
        area(at, max, v);
    }

private:
    std::uint8_t* m_d;
};

class Reader {
public:
    explicit Reader(const std::uint8_t* data) : m_d(data) {}
    template <typename T>
    void bits(std::size_t byte, unsigned bit, unsigned width, T& v) {
        std::uint64_t x = 0;
        for (unsigned i = 0; i < width; ++i) {
            const std::size_t pos = bit + i;
            x = x << 1 | ((m_d[byte + pos / 8] >> (7 - pos % 8)) & 1u);
        }
        if constexpr (std::is_same_v<T, bool>) v = x != 0;
        else v = static_cast<T>(x);
    }
    void area(std::size_t byte, std::size_t size, std::vector<std::uint8_t>& v) { v.assign(m_d + byte, m_d + byte + size); }
    void gid(std::size_t byte, Gid& g) { std::memcpy(g.data(), m_d + byte, g.size()); }
    void counted(std::size_t len_byte, unsigned len_bit, unsigned len_width, std::size_t at, std::size_t max,
                 std::vector<std::uint8_t>& v) {
        std::size_t n = 0;
        bits(len_byte, len_bit, len_width, n);
        if (n > max) m_overlong = true;
        else v.assign(m_d + at, m_d + at + n);
    }
    // A counted area claimed more bytes than it has.
    bool overlong() const { return m_overlong; }

private:
    const std::uint8_t* m_d;
    bool m_overlong = false;
};

}  // namespace hcasim::packet::mad
