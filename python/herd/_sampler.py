"""herd.ElasticSampler: the data of an elastic job."""

import torch

from . import _session as S


# --- the data of an elastic job ---------------------------------------------------------------

class ElasticSampler:
    """A batch sampler over herd's global data order that follows the job's live workers.

        sampler = herd.ElasticSampler(train_set, batch_size=64)   # instead of DistributedSampler
        loader = DataLoader(train_set, batch_sampler=sampler)      # num_workers=0
        for epoch in range(epochs):
            for x, y in loader:
                ...; opt.step()

    Iteration i of the job takes the global batch of batch_size x herd.size() samples at the
    job's data position (an epoch is a permutation of the dataset, herd.epoch_order, the same
    on every worker; the last partial global batch of an epoch is dropped); each worker gets
    its part: batch_size samples at rank x batch_size, or, after a worker died, an even share
    among the live workers, so the global batch (and the learning rate that goes with it) stays
    and every epoch still covers the whole training set. After a rollback the next batches are
    those of the iterations that run again; a worker that joins a running job starts at the
    live workers' position (the loops of the epochs before it give nothing). This is what the
    built-in C++ worker trains on (Session::DataSlice), bit for bit.

    dataset: a dataset (len()) or the number of samples. shuffle: herd's seeded permutation per
    epoch (False: 0..n-1 in order). seed: the permutation's seed (default: the job's).
    Each __iter__ is one epoch (set_epoch(e) names it, as with DistributedSampler). Build the
    herd.DistributedOptimizer first; one ElasticSampler feeds a worker's training.
    """

    def __init__(self, dataset, batch_size, shuffle=True, seed=None):
        n = dataset if isinstance(dataset, int) else len(dataset)
        if n < 1:
            raise ValueError(f"herd.ElasticSampler: the dataset is empty")
        if int(batch_size) < 1:
            raise ValueError(f"herd.ElasticSampler: batch_size must be >= 1, got {batch_size}")
        S._require()
        self.count = int(n)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._epoch = None  # set_epoch's, for the next __iter__
        self._next_epoch = 0
        self._order = (None, None)  # (epoch, its permutation)

    def set_epoch(self, epoch):
        """The epoch the next iteration over the sampler is (as DistributedSampler.set_epoch);
        without it each __iter__ is the epoch after the previous one's."""
        self._epoch = int(epoch)

    def _global(self):
        return S._joined("len(herd.ElasticSampler)").size * self.batch_size

    def __len__(self):
        """Batches of an epoch at the job's worker count (the last partial one dropped)."""
        return max(1, self.count // self._global())

    def __iter__(self):
        epoch = self._epoch if self._epoch is not None else self._next_epoch
        self._epoch = None
        self._next_epoch = epoch + 1
        if S._optimizer is None:
            raise RuntimeError("build the herd.DistributedOptimizer before iterating a "
                               "herd.ElasticSampler: the batches follow its iterations")
        while True:
            indices = S._optimizer._next_batch(self, epoch)
            if indices is None:
                return
            yield indices

    def _advance(self, at):
        """worker/data/epoch_order.cc Advance: the position one global batch later."""
        epoch, offset = at
        g = self._global()
        offset += g
        if offset + g > self.count and offset > 0:
            return (epoch + 1, 0)
        return (epoch, offset)

    def _indices(self, at, first, count):
        epoch, offset = at
        if self._order[0] != epoch:
            order = S.epoch_order(self.count, epoch, self.seed) if self.shuffle else \
                torch.arange(self.count, dtype=torch.int64)
            self._order = (epoch, order)
        positions = (offset + first + torch.arange(count, dtype=torch.int64)) % self.count
        return self._order[1][positions].tolist()

