"""One open iteration per dataset object and process, as MosaicML's.

MosaicML's StreamingDataset.__iter__ ends the iterator an earlier call
left open on the same dataset (its threads exit and it yields nothing
more) before it begins the next epoch. Sluice's iterations hold leases on
the shards they read; an earlier iterator kept alive, but no longer read
(``it = iter(ds)``, a peek, a loop left with the iterator still
referenced), held them, and under a cache_limit the next epoch waited for
that space until stall_timeout. StreamingDataset.__iter__ calls end_open
before it begins, and track on what it returns.

The set lives on the dataset object (not pickled: a DataLoader worker's
copy starts with none) and holds the generators weakly, so an iterator the
user dropped is not kept alive by it.
"""

import os
import weakref

_ATTR = "_live_iterations"


def end_open(ds):
    """Closes the iterators ds.__iter__ returned earlier in this process
    that are still open: each releases its connection and leases, and
    yields nothing more. One running in another thread is left alone."""
    live = ds.__dict__.get(_ATTR)
    if live is None or live[0] != os.getpid():
        return
    for gen in list(live[1]):
        try:
            gen.close()
        except ValueError:
            pass  # executing in another thread right now
    live[1].clear()


def track(ds, gen):
    """Records gen, an iterator ds.__iter__ returns, and returns it."""
    live = ds.__dict__.get(_ATTR)
    if live is None or live[0] != os.getpid():
        live = (os.getpid(), weakref.WeakSet())
        ds.__dict__[_ATTR] = live
    live[1].add(gen)
    return gen


def forget(state):
    """Drops the record from a pickled dataset's state (a dict)."""
    state.pop(_ATTR, None)
