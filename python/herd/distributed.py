"""`import herd.distributed` registers herd's torch.distributed backend, so an unchanged
torch.distributed script runs over herd with `init_process_group(backend="herd")` (herd/_backend.py,
docs/python.md "From DDP")."""

from ._backend import NAME, register  # noqa: F401
