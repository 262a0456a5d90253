// herd-copy-bench: this machine's memory copy bandwidth, the yardstick of the shared-memory
// collectives (docs/BENCHMARKS.md, "the physical limit"). N processes run at once, each
// memcpy'ing its own S-byte buffer into another R times after one untimed copy; it prints each
// process's rate and their sum in GB/s of bytes copied (each byte copied is one read and one
// write of memory).
//
//   herd-copy-bench [--procs N] [--bytes S] [--reps R]      (defaults: 2, 64M, 10)

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "bench/sizes.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Usage() {
  std::fprintf(stderr, "usage: herd-copy-bench [--procs N] [--bytes S] [--reps R]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int procs = 2, reps = 10;
  size_t bytes = size_t{64} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--procs" && absl::SimpleAtoi(argv[i + 1], &procs) && procs >= 1) continue;
    if (flag == "--reps" && absl::SimpleAtoi(argv[i + 1], &reps) && reps >= 1) continue;
    if (flag == "--bytes") {
      auto b = herd::bench::ParseByteSize(argv[i + 1]);
      if (b.ok() && *b > 0) {
        bytes = *b;
        continue;
      }
    }
    return Usage();
  }
  if (argc % 2 == 0) return Usage();
  // Each child writes its rate here; all start together on a flag in shared memory.
  auto* shared = static_cast<volatile double*>(
      mmap(nullptr, 4096 + 8 * procs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  auto* go = reinterpret_cast<volatile int*>(const_cast<double*>(shared) + procs);
  *go = 0;
  for (int p = 0; p < procs; ++p) {
    if (fork() != 0) continue;
    char* a = static_cast<char*>(std::aligned_alloc(4096, bytes));
    char* b = static_cast<char*>(std::aligned_alloc(4096, bytes));
    std::memset(a, 1, bytes);
    std::memcpy(b, a, bytes);  // faults every page in, untimed
    __atomic_add_fetch(go, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(go, __ATOMIC_SEQ_CST) < procs) {
    }
    const double t0 = Now();
    for (int r = 0; r < reps; ++r) {
      std::memcpy((r & 1) ? a : b, (r & 1) ? b : a, bytes);
      asm volatile("" ::: "memory");
    }
    shared[p] = static_cast<double>(reps) * bytes / (Now() - t0) / 1e9;
    _exit(0);
  }
  while (wait(nullptr) > 0) {
  }
  double total = 0;
  for (int p = 0; p < procs; ++p) {
    std::printf("process %d: %.2f GB/s\n", p, shared[p]);
    total += shared[p];
  }
  std::printf("%d processes, %s each, %d copies: %.2f GB/s copied in all\n", procs,
              herd::bench::FormatByteSize(bytes).c_str(), reps, total);
  return 0;
}
