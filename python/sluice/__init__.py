"""Sluice: MosaicML-compatible streaming datasets served by a per-node agent.

Replace ``from streaming import StreamingDataset, Stream,
StreamingDataLoader`` with ``from sluice import ...``; the arguments,
defaults, sample order and state dicts are MosaicML's.
"""

from ._decode import PickleBytes
from ._encoded import EncodedTensor
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
from .images import DecodeImage
from .local import LocalDataset

from ._version import __version__
from .wds import WebDataset, WebLoader
from .writer import CSVWriter, JSONWriter, MDSWriter, TSVWriter, WriterError, XSVWriter, merge_index

__all__ = [
    "CSVWriter",
    "JSONWriter",
    "MDSWriter",
    "TSVWriter",
    "WriterError",
    "XSVWriter",
    "merge_index",
    "AgentError",
    "AgentTimeoutError",
    "CacheLimitError",
    "CorruptDataError",
    "DecodeImage",
    "EncodedTensor",
    "DatasetNotFoundError",
    "InvalidArgumentError",
    "LocalDataset",
    "PermissionDeniedError",
    "PickleBytes",
    "ProtocolError",
    "SluiceError",
    "Stream",
    "StreamingDataLoader",
    "StreamingDataset",
    "WebDataset",
    "WebLoader",
]
