#pragma once
// What any role of a job records from the libraries they share: heartbeats to the scheduler
// that failed (scheduler/client/heartbeat_loop.cc: workers and shards), RocksDB writes
// (storage/database.cc: the shards' and the scheduler's state) and the state files of
// checkpoints (checkpoint/writer.cc: workers and shards). Names and labels: docs/metrics.md.
//
// Threading: any thread; every accessor returns a series looked up once.

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

namespace herd::metrics {

class ProcessMetrics {
 public:
  static ProcessMetrics& Get();  // the process's, registered on first use

  // A heartbeat that got no answer (the scheduler away, restarting, or too slow).
  prometheus::Counter& heartbeats_missed() { return heartbeats_missed_; }
  // One RocksDB WriteBatch, with or without fsync.
  prometheus::Histogram& rocksdb_write_seconds(bool sync) {
    return sync ? rocksdb_sync_write_ : rocksdb_write_;
  }
  // One checkpoint state file written (and fsynced), its time and size.
  void RecordCheckpointWrite(double seconds, double bytes);

 private:
  ProcessMetrics();

  prometheus::Counter& heartbeats_missed_;
  prometheus::Histogram& rocksdb_write_;
  prometheus::Histogram& rocksdb_sync_write_;
  prometheus::Histogram& checkpoint_write_;
  prometheus::Counter& checkpoint_bytes_;
  prometheus::Gauge& checkpoint_last_bytes_;
};

}  // namespace herd::metrics
