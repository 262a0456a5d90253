#pragma once
// `herd checkpoint export PATH --out FILE`: the model's parameters of a checkpoint as a file
// torch.load reads. Writing torch's format takes libtorch, so the work is done in herd-torch
// (cli/torch/export_model.cc); in `herd` this hands the whole command over to it
// (cli/torch_forwarding.cc). Returns the exit code.

#include <string>

namespace herd::cli {

int ExportModel(const std::string& path, const std::string& out);

}  // namespace herd::cli
