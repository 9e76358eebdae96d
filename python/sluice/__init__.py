"""Sluice: MosaicML-compatible streaming datasets served by a per-node agent.

Replace ``from streaming import StreamingDataset, Stream,
StreamingDataLoader`` with ``from sluice import ...``; the arguments,
defaults, sample order and state dicts are MosaicML's.
"""

from ._decode import PickleBytes
from .dataloader import StreamingDataLoader
from .dataset import Stream, StreamingDataset
from .errors import (
    AgentError,
    AgentTimeoutError,
    CacheLimitError,
    CorruptDataError,
    DatasetNotFoundError,
    InvalidArgumentError,
    PermissionDeniedError,
    ProtocolError,
    SluiceError,
)

__version__ = "0.1.0"

__all__ = [
    "AgentError",
    "AgentTimeoutError",
    "CacheLimitError",
    "CorruptDataError",
    "DatasetNotFoundError",
    "InvalidArgumentError",
    "PermissionDeniedError",
    "PickleBytes",
    "ProtocolError",
    "SluiceError",
    "Stream",
    "StreamingDataLoader",
    "StreamingDataset",
]
