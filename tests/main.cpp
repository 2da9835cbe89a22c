// The unit test runner: doctest's main. Each tests/*.cpp is one ctest entry (--source-file).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
