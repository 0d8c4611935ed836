"""Training input: records back as samples and batches.

Modules: :mod:`.dataset` (``RecordDataset`` for torch ``DataLoader``\\ s;
:mod:`.targets`, its detection targets),
:mod:`.iterator` (``ImageRecordIter``, MXNet's iterator; :mod:`.epochs`, the machinery
of both iterators), :mod:`.detiter`
(``ImageDetRecordIter``, its detection iterator; :mod:`.detfill`, a
detection batch), :mod:`.vocabulary`
(MXNet's iterator keywords, batches and part/shuffle rules),
:mod:`.batching` (batch slots in shared memory and their workers),
:mod:`.filling` (one batch built by a worker), :mod:`.mixture` (several recs
as one dataset, in set proportions), :mod:`.loading`
(whole batches for a ``DataLoader``, moved without a copy) and
:mod:`.augment` (``Augmenter``: MXNet's augmentation options, in its order;
``DetAugmenter``, its detection augmenter).
"""

from .augment import Augmenter
from .augment.detection import DetAugmenter
from .blockorder import BlockSampler
from .dataset import RecordDataset
from .detdraw import DetTransform
from .detiter import ImageDetRecordIter, objects_view
from .iterator import (
    DataBatch,
    DataDesc,
    ImageRecordInt8Iter,
    ImageRecordIter,
    ImageRecordUInt8Iter,
    MXArray,
)
from .loading import collate
from .mixture import MixedDataset, MixtureSampler
from .sampler_state import merge_states

__all__ = [
    "Augmenter",
    "BlockSampler",
    "DataBatch",
    "DataDesc",
    "DetAugmenter",
    "DetTransform",
    "ImageDetRecordIter",
    "ImageRecordInt8Iter",
    "ImageRecordIter",
    "ImageRecordUInt8Iter",
    "MXArray",
    "MixedDataset",
    "MixtureSampler",
    "RecordDataset",
    "collate",
    "merge_states",
    "objects_view",
]
