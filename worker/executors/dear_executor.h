#pragma once
// Mode `dear`: all-reduce decoupled into its two halves and pipelined with both passes.
//
//  BackPipe  the reduce-scatter of a bucket starts on the communication thread as soon as the
//            bucket and every bucket before it are complete in backward; EndBackward waits for
//            every reduce-scatter.
//  FeedPipe  the all-gather of forward bucket 0 (the first layers) starts right after backward;
//            the all-gather of forward bucket f+1 starts when the next forward reaches bucket f,
//            and BeforeForward waits for bucket f's all-gather just before its first tensor's
//            module runs, then applies the optimizer update to that bucket's tensors.
//
// So the communication of the all-gathers hides behind the forward pass of the buckets before
// them. Parameters of a bucket are current after its BeforeForward, or after Flush().
// The fusion threshold is fixed or tuned online (FusionSettings::tune, worker/fusion_tuning.h):
// a new threshold takes effect at an iteration boundary, the same one on every rank.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/executor.h"

namespace herd::worker {

absl::StatusOr<std::unique_ptr<Executor>> MakeDearExecutor(const ExecutorContext& context);

}  // namespace herd::worker
