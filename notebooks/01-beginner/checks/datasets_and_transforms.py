"""Checks, hints and reference solutions of the lesson datasets_and_transforms (hidden from the notebook)."""
import torch
from torch.utils.data import TensorDataset

from sampan.path.exercise import Exercise, Incorrect, expect
from sampan.vision import transforms as T


class flattened(Exercise):
    hints = (
        {"en": "A Dataset needs two methods: __len__ (how many items) and __getitem__ (item i). Ask self.base for both.",
         "zh": "Dataset 需要两个方法：__len__（有多少项）和 __getitem__（第 i 项）。两者都去问 self.base。"},
        {"en": "__len__ returns len(self.base); __getitem__ takes image, label = self.base[i] and returns the image flattened.",
         "zh": "__len__ 返回 len(self.base)；__getitem__ 取 image, label = self.base[i]，返回展平后的图像和标签。"},
    )
    solution = '''
class Flattened(Dataset):
    def __init__(self, base):
        self.base = base

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        image, label = self.base[i]
        return image.flatten(), label
'''

    def verify(self, Flattened, *, base=None):
        gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, ())))
        n = int(torch.randint(5, 40, (), generator=gen))
        shape = (int(torch.randint(1, 4, (), generator=gen)), *torch.randint(2, 9, (2,), generator=gen).tolist())
        hidden = TensorDataset(torch.rand(n, *shape, generator=gen), torch.randint(0, 10, (n,), generator=gen))
        for ds in ([base] if base is not None else []) + [hidden]:
            flat = Flattened(ds)
            if len(flat) != len(ds):
                raise Incorrect({"en": f"len(Flattened(ds)) is {len(flat)} for a dataset of {len(ds)} items",
                                 "zh": f"对一个有 {len(ds)} 项的数据集，len(Flattened(ds)) 是 {len(flat)}"})
            for i in (0, len(ds) - 1, int(torch.randint(0, len(ds), (), generator=gen))):
                image, label = ds[i]
                got = flat[i]
                if not isinstance(got, tuple) or len(got) != 2:
                    raise Incorrect({"en": f"Flattened(ds)[{i}] must be a pair (image, label), got {type(got).__name__}",
                                     "zh": f"Flattened(ds)[{i}] 必须是 (image, label) 二元组，得到的是 {type(got).__name__}"})
                image_shape = tuple(image.shape)
                expect(got[0], image.flatten(), {"en": f"the image of item {i} of a dataset of {image_shape} images",
                                                 "zh": f"图像形状为 {image_shape} 的数据集第 {i} 项的图像"})
                expect(int(got[1]), int(label), {"en": f"the label of item {i}", "zh": f"第 {i} 项的标签"})


class lenet_tf(Exercise):
    hints = (
        {"en": "Chain two transforms with T.Compose: first make the image 28×28, then move [0, 1] to [-1, 1].",
         "zh": "用 T.Compose 串起两个变换：先把图像变成 28×28，再把 [0, 1] 变到 [-1, 1]。"},
        {"en": "T.Compose([T.Resize(28, antialias=True), T.Normalize(mean=[...], std=[...])]): (x - mean) / std maps 0 to -1 and 1 to 1.",
         "zh": "T.Compose([T.Resize(28, antialias=True), T.Normalize(mean=[...], std=[...])])：(x - mean) / std 把 0 变成 -1、把 1 变成 1。"},
    )
    solution = '''
lenet_tf = T.Compose([T.Resize(28, antialias=True), T.Normalize(mean=[0.5], std=[0.5])])
'''

    def verify(self, lenet_tf, *, images=()):
        hidden = [torch.rand(1, 8, 8) for _ in range(3)] + [torch.zeros(1, 8, 8), torch.ones(1, 8, 8)]
        for image in list(images) + hidden:
            out = lenet_tf(image.clone())
            if tuple(out.shape) != (1, 28, 28):
                raise Incorrect({"en": f"a 1×8×8 digit became shape {tuple(out.shape)}, expected (1, 28, 28)",
                                 "zh": f"1×8×8 的数字图像变成了形状 {tuple(out.shape)}，应为 (1, 28, 28)"})
            want = T.Resize(28, antialias=True)(image) * 2 - 1
            expect(out, want, {"en": "the pixels after your transform (0 must become -1 and 1 must stay 1)",
                               "zh": "你的变换之后的像素（0 必须变成 -1，1 必须仍是 1）"}, atol=1e-4)
