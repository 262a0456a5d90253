// herd-bench-mpi: OpenMPI's collectives in the layout of `herd bench collectives`, started by
// the driver under `mpirun -np N --oversubscribe` with OpenMPI's default transports (shared
// memory between processes of one host). Rank 0 prints one result JSON line per measurement.
//
// Ops: MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast and MPI_Reduce (root
// 0), in place (MPI_IN_PLACE) like herd's; MPI_Alltoall out of place. fp16 and bf16 have no MPI
// datatype: they travel as MPI_UINT16_T and reduce with a user-defined op built on herd's
// kernels (common/reduce.h), which also keeps OpenMPI off its built-in vectorised sum for them.

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/pattern.h"
#include "bench/peers/peer_layout.h"
#include "bench/report.h"
#include "common/deadline.h"
#include "common/reduce.h"

namespace herd::bench {
namespace {

DType g_dtype = DType::kFloat32;  // the user op's element type (MPI ops take no context)

void SumHalf(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(g_dtype, ReduceOp::kSum, inout, in, static_cast<size_t>(*len));
}

struct MpiTypes {
  MPI_Datatype type;
  MPI_Op sum;
};

MpiTypes TypesFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {MPI_FLOAT, MPI_SUM};
    case DType::kFloat64:
      return {MPI_DOUBLE, MPI_SUM};
    default: {
      static MPI_Op half_sum = MPI_OP_NULL;
      if (half_sum == MPI_OP_NULL) MPI_Op_create(&SumHalf, /*commute=*/1, &half_sum);
      return {MPI_UINT16_T, half_sum};
    }
  }
}

std::string_view MpiName(BenchOp op) {
  switch (op) {
    case BenchOp::kAllReduce:
      return "MPI_Allreduce";
    case BenchOp::kReduceScatter:
      return "MPI_Reduce_scatter_block";
    case BenchOp::kAllGather:
      return "MPI_Allgather";
    case BenchOp::kBroadcast:
      return "MPI_Bcast";
    case BenchOp::kReduce:
      return "MPI_Reduce";
    case BenchOp::kAllToAll:
      return "MPI_Alltoall";
  }
  return "?";
}

class MpiSweep {
 public:
  MpiSweep(const SweepSpec& spec, int rank, int ranks)
      : spec_(spec), rank_(rank), ranks_(ranks), types_(TypesFor(spec.dtype)) {}

  void Run() {
    const size_t esize = DTypeSize(spec_.dtype);
    size_t max_count = 0;
    for (size_t s : spec_.sizes) max_count = std::max(max_count, ElementCount(s, spec_.dtype));
    // Zero-filled up front so no page fault lands in a timed loop.
    data_.assign(max_count * esize, std::byte{0});
    for (BenchOp op : spec_.ops) {
      if (op == BenchOp::kAllToAll) out_.assign(max_count * esize, std::byte{0});
    }
    for (BenchOp op : spec_.ops) {
      for (size_t requested : spec_.sizes) Measure(op, requested);
    }
  }

 private:
  void Measure(BenchOp op, size_t requested) {
    const size_t count = PeerElementCount(op, requested, spec_.dtype, ranks_);
    if (count == 0 || count > static_cast<size_t>(INT_MAX)) {
      if (rank_ == 0) {
        Print(MakeUnmeasured(
            "mpi", op, std::string(MpiName(op)), ranks_, requested,
            std::string(DTypeName(spec_.dtype)),
            count == 0 ? "fewer elements than ranks" : "more elements than an MPI count holds"));
      }
      return;
    }
    const int iters = IterationsFor(spec_, requested);
    const int warmup = WarmupFor(spec_, requested);
    RankReport report;
    if (spec_.check) {
      PrepareHerdInputs(op, spec_.dtype, ranks_, rank_, count, data_.data(), out_.data());
      Call(op, count);
      auto bad =
          VerifyPeerOutputs(op, spec_.dtype, ranks_, rank_, count, data_.data(), out_.data());
      report.checked = 1;
      report.check_ok = bad ? 0 : 1;
      if (bad) {
        report.bad_index = bad->index;
        report.got = bad->got;
        report.expected = bad->expected;
      }
    }
    for (int i = 0; i < warmup; ++i) Call(op, count);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) Call(op, count);
    report.seconds_per_iter = std::chrono::duration<double>(Clock::now() - start).count() / iters;

    std::vector<RankReport> all(rank_ == 0 ? ranks_ : 0);
    MPI_Gather(&report, sizeof report, MPI_BYTE, all.data(), sizeof report, MPI_BYTE, 0,
               MPI_COMM_WORLD);
    if (rank_ == 0) {
      Print(Summarise(Measurement{"mpi", op, std::string(MpiName(op)), spec_.dtype, count,
                                  requested, iters, spec_.check},
                      all));
    }
  }

  void Call(BenchOp op, size_t count) {
    void* data = data_.data();
    const int n = static_cast<int>(count);
    const int block = n / ranks_;
    switch (op) {
      case BenchOp::kAllReduce:
        MPI_Allreduce(MPI_IN_PLACE, data, n, types_.type, types_.sum, MPI_COMM_WORLD);
        return;
      case BenchOp::kReduceScatter:
        // In place: the whole vector in, this rank's block out at the start of the buffer.
        MPI_Reduce_scatter_block(MPI_IN_PLACE, data, block, types_.type, types_.sum,
                                 MPI_COMM_WORLD);
        return;
      case BenchOp::kAllGather:
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, block, types_.type, MPI_COMM_WORLD);
        return;
      case BenchOp::kBroadcast:
        MPI_Bcast(data, n, types_.type, 0, MPI_COMM_WORLD);
        return;
      case BenchOp::kReduce:
        MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : data, data, n, types_.type, types_.sum, 0,
                   MPI_COMM_WORLD);
        return;
      case BenchOp::kAllToAll:
        MPI_Alltoall(data, block, types_.type, out_.data(), block, types_.type, MPI_COMM_WORLD);
        return;
    }
  }

  static void Print(const BenchResult& r) {
    std::printf("%s\n", ToJsonLine(r).c_str());
    std::fflush(stdout);
  }

  const SweepSpec& spec_;
  const int rank_, ranks_;
  const MpiTypes types_;
  std::vector<std::byte> data_, out_;
};

}  // namespace
}  // namespace herd::bench

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  CLI::App app{"herd-bench-mpi: OpenMPI peer of herd bench collectives (run under mpirun)"};
  herd::bench::PeerFlags flags;
  flags.Register(app, /*with_rendezvous=*/false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    MPI_Finalize();
    return code == 0 ? 0 : 2;
  }
  auto spec = flags.sweep.ToSpec();
  if (!spec.ok()) {
    if (rank == 0) std::fprintf(stderr, "herd-bench-mpi: %s\n", spec.status().ToString().c_str());
    MPI_Finalize();
    return 2;
  }
  herd::bench::g_dtype = spec->dtype;
  herd::bench::MpiSweep(*spec, rank, ranks).Run();
  MPI_Finalize();
  return 0;
}
