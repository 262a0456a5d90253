"""herd: data-parallel training. ``import herd.torch as herd`` trains your own PyTorch model
with every mode of herd; see docs/python.md."""
