"""Evaluates a model exported by `herd checkpoint export` on the Fashion-MNIST test set, the way
a user would: a torch module of the built-in layout, load_state_dict, a forward pass.

usage: evaluate_exported_model.py MODEL.pt mlp|cnn DATA_DIR REPORTED_ACCURACY
Prints the accuracy; exits 0 when it equals the accuracy the job reported (within one test
sample: the same parameters give the same predictions), 1 otherwise.
"""
import gzip
import sys

import torch
import torch.nn.functional as F


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 256)
        self.fc2 = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def read_idx(path: str, header: int) -> bytes:
    with gzip.open(path, "rb") as f:
        return f.read()[header:]


def main() -> int:
    path, name, data_dir, reported = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    model = {"mlp": Mlp, "cnn": Cnn}[name]()
    model.load_state_dict(torch.load(path), strict=True)
    model.eval()
    pixels = read_idx(f"{data_dir}/t10k-images-idx3-ubyte.gz", 16)
    labels = torch.tensor(list(read_idx(f"{data_dir}/t10k-labels-idx1-ubyte.gz", 8)))
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).float().div(255.0)
    images = images.reshape(-1, 1, 28, 28)
    with torch.no_grad():
        correct = sum(
            int(model(images[b : b + 1000]).argmax(1).eq(labels[b : b + 1000]).sum())
            for b in range(0, len(labels), 1000)
        )
    accuracy = correct / len(labels)
    print(f"accuracy {accuracy:.4f} on {len(labels)} test images; the job reported {reported:.4f}")
    return 0 if abs(accuracy - reported) <= 1.0 / len(labels) + 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
