"""Checks, hints and reference solution of the lesson serving (hidden from the notebook).

``predict_all(post, images, max_batch)`` is run against a stand-in for the service that refuses requests
larger than ``max_batch`` and counts the requests, on the visible case and on batch limits and image counts
drawn at random, so that only a function that splits correctly, in order, with the fewest requests passes.
"""
import math

import numpy as np

from sampan.path.exercise import Exercise, Incorrect


class _Service:
    """Answers like POST /predict: one class per image, computed from the image itself; counts requests."""

    def __init__(self, max_batch: int):
        self.max_batch, self.requests = max_batch, []

    @staticmethod
    def classes(images: np.ndarray) -> list[int]:
        flat = np.asarray(images, dtype=np.float64).reshape(len(images), -1)
        return [int(v) for v in np.floor(np.abs(flat.sum(1)) * 7919) % 10]

    def __call__(self, images):
        images = np.asarray(images, dtype=np.float32)
        if images.ndim != 4 or not 1 <= len(images) <= self.max_batch:
            raise ValueError(f"422: the service got {list(images.shape)}, expected [N, 1, 28, 28] "
                             f"with 1 <= N <= {self.max_batch}")
        self.requests.append(len(images))
        return self.classes(images)


def _cases():
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    yield 10, 4  # the visible case: 10 images, at most 4 per request
    for _ in range(3):
        max_batch = int(rng.integers(2, 40))
        count = int(rng.integers(1, 4 * max_batch))
        yield count, max_batch
    yield int(rng.integers(2, 20)) * 8, 8  # an exact multiple
    yield 3, 64  # fewer images than one request holds


class predict_all(Exercise):
    hints = (
        {"en": "Walk through the images in steps of max_batch, post each slice, and append each answer to one list.",
         "zh": "以 max_batch 为步长遍历图像，把每一段发给服务，再把每次的回答依次接到同一个列表后面。"},
        {"en": "classes = []; for start in range(0, len(images), max_batch): classes += list(post(images[start:...])); "
               "return classes",
         "zh": "classes = []；for start in range(0, len(images), max_batch): classes += list(post(images[start:...]))；"
               "return classes"},
    )
    solution = '''
def predict_all(post, images, max_batch):
    classes = []
    for start in range(0, len(images), max_batch):
        classes += list(post(images[start:start + max_batch]))
    return classes
'''

    def verify(self, predict_all):
        rng = np.random.default_rng()
        for count, max_batch in _cases():
            images = rng.random((count, 1, 28, 28), dtype=np.float32)
            service = _Service(max_batch)
            try:
                got = predict_all(service, images, max_batch)
            except ValueError as err:
                if str(err).startswith("422"):
                    raise Incorrect({"en": f"with {count} images and max_batch={max_batch} the service refused a request: {err}",
                                     "zh": f"{count} 张图像、max_batch={max_batch} 时，服务拒绝了一个请求：{err}"})
                raise
            got = [int(c) for c in got]
            expected = _Service.classes(images)
            if len(got) != count:
                raise Incorrect({"en": f"{count} images (max_batch={max_batch}) gave {len(got)} classes, expected {count}",
                                 "zh": f"{count} 张图像（max_batch={max_batch}）得到了 {len(got)} 个类别，应为 {count} 个"})
            if got != expected:
                raise Incorrect({"en": f"{count} images (max_batch={max_batch}): the classes are not the service's answers "
                                       "in the order of the images",
                                 "zh": f"{count} 张图像（max_batch={max_batch}）：得到的类别不是服务按图像顺序给出的回答"})
            fewest = math.ceil(count / max_batch)
            if len(service.requests) != fewest:
                raise Incorrect({"en": f"{count} images with max_batch={max_batch} took {len(service.requests)} requests "
                                       f"({service.requests}); {fewest} are enough",
                                 "zh": f"{count} 张图像、max_batch={max_batch} 时发了 {len(service.requests)} 个请求"
                                       f"（{service.requests}）；{fewest} 个就够了"})
