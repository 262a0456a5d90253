"""Loads a model exported by `herd checkpoint export` with torch.load, checks every value
against the values the test wrote, and loads it into a torch module of the same layout.

usage: load_exported_model.py MODEL.pt ITERATION
The test's checkpoint (tests/unit/checkpoint/checkpoint_test_util.cc) holds tensors "a" of
shape [2, 5] and "b" of shape [7]; worker 0's element i of tensor k (a: 1, b: 2) at iteration
it is k * 1000 + it + i / 16. Exits 0 when everything matches, 1 with the difference otherwise.
"""
import sys

import torch


def main() -> int:
    path, iteration = sys.argv[1], int(sys.argv[2])
    state = torch.load(path)
    if not isinstance(state, dict) or sorted(state) != ["a", "b"]:
        print(f"expected a dict with tensors a and b, got {type(state).__name__}: {state}")
        return 1
    for name, kind, shape in (("a", 1, [2, 5]), ("b", 2, [7])):
        t = state[name]
        if t.dtype != torch.float32 or list(t.shape) != shape:
            print(f"{name}: {t.dtype} {list(t.shape)}, expected float32 {shape}")
            return 1
        want = torch.tensor(
            [kind * 1000 + iteration + i / 16 for i in range(t.numel())], dtype=torch.float32
        ).reshape(shape)
        if not torch.equal(t, want):
            print(f"{name}: {t} differs from {want}")
            return 1

    # The same dict loads into a module with these parameters (what a user does for inference).
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.zeros(2, 5))
            self.b = torch.nn.Parameter(torch.zeros(7))

    model = Model()
    model.load_state_dict(state, strict=True)
    if model.a.sum().item() != state["a"].sum().item():
        print("load_state_dict did not load a")
        return 1
    print(f"loaded {path}: a {list(state['a'].shape)}, b {list(state['b'].shape)}, values match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
