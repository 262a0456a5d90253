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

#include "bench/peers/peer_layout.h"
#include "common/reduce.h"

// LeakSanitizer (scripts/sanitize.sh asan): OpenMPI keeps allocations of its own and of the
// components it unloads with dlclose until the process ends; LSan reports them with no frame of
// this program, some in an unloaded ("unknown") module that no suppression can name. This peer
// is OpenMPI's side of the comparison, so leak checking is off for this process alone (LSan's
// documented hook); AddressSanitizer and UBSan still check it.
extern "C" int __lsan_is_turned_off() { return 1; }

namespace herd::bench {
namespace {

DType g_dtype = DType::kFloat32;  // the user op's element type (MPI ops take no context)

void SumHalf(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(g_dtype, ReduceOp::kSum, inout, in, static_cast<size_t>(*len));
}

std::string MpiName(BenchOp op) {
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

void Run(const SweepSpec& spec, int rank, int ranks) {
  g_dtype = spec.dtype;
  MPI_Datatype type = spec.dtype == DType::kFloat32   ? MPI_FLOAT
                      : spec.dtype == DType::kFloat64 ? MPI_DOUBLE
                                                      : MPI_UINT16_T;
  MPI_Op sum = MPI_SUM;
  if (type == MPI_UINT16_T) MPI_Op_create(&SumHalf, /*commute=*/1, &sum);
  Peer peer{"mpi", rank, ranks, MpiName};
  peer.why_not = [](BenchOp, size_t count) -> std::string {
    if (count == 0) return "fewer elements than ranks";
    if (count > static_cast<size_t>(INT_MAX)) return "more elements than an MPI count holds";
    return "";
  };
  peer.call = [&](BenchOp op, size_t count, void* data, void* out) -> std::function<void()> {
    const int n = static_cast<int>(count), block = n / ranks;
    switch (op) {
      case BenchOp::kAllReduce:
        return [=] { MPI_Allreduce(MPI_IN_PLACE, data, n, type, sum, MPI_COMM_WORLD); };
      case BenchOp::kReduceScatter:
        // In place: the whole vector in, this rank's block out at the start of the buffer.
        return
            [=] { MPI_Reduce_scatter_block(MPI_IN_PLACE, data, block, type, sum, MPI_COMM_WORLD); };
      case BenchOp::kAllGather:
        return [=] {
          MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, block, type, MPI_COMM_WORLD);
        };
      case BenchOp::kBroadcast:
        return [=] { MPI_Bcast(data, n, type, 0, MPI_COMM_WORLD); };
      case BenchOp::kReduce:
        return [=] {
          MPI_Reduce(rank == 0 ? MPI_IN_PLACE : data, data, n, type, sum, 0, MPI_COMM_WORLD);
        };
      case BenchOp::kAllToAll:
        return [=] { MPI_Alltoall(data, block, type, out, block, type, MPI_COMM_WORLD); };
    }
    return [] {};
  };
  peer.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  peer.gather = [&](const RankReport& mine) {
    std::vector<RankReport> all(rank == 0 ? ranks : 0);
    MPI_Gather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    return all;
  };
  RunPeerSweep(spec, peer);
}

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
  herd::bench::Run(*spec, rank, ranks);
  MPI_Finalize();
  return 0;
}
