#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

// libsystemc refers to sc_main; the tests build their systems in child
// processes and never call it.
int sc_main(int, char**) { return 0; }
