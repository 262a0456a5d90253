#pragma once
// Mode `dear`: all-reduce decoupled into its two halves and pipelined with both passes.
//
//  BackPipe  the reduce-scatter of a bucket starts on the communication thread as soon as the
//            bucket and every bucket before it are complete in backward; EndBackward waits for
//            every reduce-scatter.
//  FeedPipe  the all-gathers of every bucket start right after backward, in forward order (the
//            first layers first), queued on the communication thread; BeforeForward waits for
//            bucket f's all-gather just before its first tensor's module runs, then applies the
//            optimizer update to that bucket's tensors.
//
// So the communication of the all-gathers hides behind the forward pass of the buckets before
// them. The paper starts the next layer's all-gather when a layer's forward begins; on a GPU
// that moment is when the forward is *issued*, which runs ahead of the device, so in effect all
// all-gathers are queued at once. Here BeforeForward blocks the compute thread, and a literal
// one-ahead launch left the link idle while a bucket computed and serialised small buckets'
// all-gathers with their compute: in the DeAR replay (docs/dear.md) it made dear slower than
// allreduce wherever the forward is long, and ate the gain of small thresholds. Parameters of a
// bucket are current after its BeforeForward, or after Flush(). The fusion threshold is fixed or
// tuned online (FusionSettings::tune, worker/fusion_tuning.h): a new threshold takes effect at an
// iteration boundary, the same one on every rank.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeDearExecutor(const ExecutorContext& context);

}  // namespace herd::worker
