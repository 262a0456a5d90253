#include "metrics/process_metrics.h"

#include "metrics/registry.h"

namespace herd::metrics {
namespace {

prometheus::Family<prometheus::Histogram>& RocksDbWrites() {
  static auto& family = prometheus::BuildHistogram()
                            .Name("herd_rocksdb_write_seconds")
                            .Help(
                                "Latency of one RocksDB write batch of this process's state, "
                                "by whether it was fsynced (sync: true or false)")
                            .Register(Registry());
  return family;
}

}  // namespace

ProcessMetrics& ProcessMetrics::Get() {
  static auto* metrics = new ProcessMetrics();
  return *metrics;
}

ProcessMetrics::ProcessMetrics()
    : heartbeats_missed_(prometheus::BuildCounter()
                             .Name("herd_heartbeats_missed_total")
                             .Help("Heartbeats to the scheduler that got no answer")
                             .Register(Registry())
                             .Add({})),
      rocksdb_write_(RocksDbWrites().Add({{"sync", "false"}}, LatencyBuckets())),
      rocksdb_sync_write_(RocksDbWrites().Add({{"sync", "true"}}, LatencyBuckets())),
      checkpoint_write_(prometheus::BuildHistogram()
                            .Name("herd_checkpoint_write_seconds")
                            .Help("Time to write and fsync this process's state file of a "
                                  "checkpoint (in the background; training goes on)")
                            .Register(Registry())
                            .Add({}, LatencyBuckets())),
      checkpoint_bytes_(prometheus::BuildCounter()
                            .Name("herd_checkpoint_written_bytes_total")
                            .Help("Bytes of checkpoint state files this process wrote")
                            .Register(Registry())
                            .Add({})),
      checkpoint_last_bytes_(prometheus::BuildGauge()
                                 .Name("herd_checkpoint_last_bytes")
                                 .Help("Size of this process's last checkpoint state file")
                                 .Register(Registry())
                                 .Add({})) {}

void ProcessMetrics::RecordCheckpointWrite(double seconds, double bytes) {
  checkpoint_write_.Observe(seconds);
  checkpoint_bytes_.Increment(bytes);
  checkpoint_last_bytes_.Set(bytes);
}

}  // namespace herd::metrics
