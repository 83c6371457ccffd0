// test_check.h: the failure counter and checks of the kernels' C++ tests (emu_test,
// linear_test, attention_plan_test). Each test counts failures and goes on, then exits 1 if any.
#ifndef DECODEBENCH_TEST_CHECK_H
#define DECODEBENCH_TEST_CHECK_H

#include <atomic>
#include <cstdio>
#include <string>

#include "../decodebench.h"

// Atomic: linear_test checks from several host threads at once.
inline std::atomic<int> g_failures{0};

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                    \
      std::printf("\n");                                           \
    }                                                              \
  } while (0)

// The calling thread's last failure message from the kernels library.
inline std::string last_error() {
  char buf[1024];
  db_last_error_message(buf, sizeof buf);
  return buf;
}

#endif
