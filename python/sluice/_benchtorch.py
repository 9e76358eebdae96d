"""The training loop of `sluice bench --torch-model`: a real torch step
(forward, backward, SGD) on every batch, on the GPU when torch sees one,
timing each step's wait for its batch.

Run by the Go command as ``python -m sluice._benchtorch CONFIG_JSON``; it
prints one JSON object per line on stdout: a step ({"step", "t", "wait",
"compute", "samples"}), then {"summary": {...}}, or {"skipped": reason}
when the loader it was asked for cannot run here (MosaicML's streaming
package not importable). Loaders ("mode"):

* ``sluice``: sluice.StreamingDataset over the agent, through
  sluice.StreamingDataLoader (the cold and warm runs);
* ``files``: a plain torch DataLoader over one file per sample (the files
  the Go side exported), each decoded with the dataset's own record
  decoder, so it does the same decode work;
* ``mosaicml``: MosaicML's streaming.StreamingDataset and
  StreamingDataLoader over the same remote, with a cache of its own.

Every sample becomes a 3 x S x S float image: an image column (PIL) is
converted and resized; otherwise the first array or bytes column's bytes
are laid out as pixels (cut or zero-padded). The label is the "label",
"class", "target" or "labels" column modulo the classes, else 0.
"""

import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

_LABELS = ("label", "class", "target", "labels", "cls")


# -- ResNet-18 ------------------------------------------------------------


class _Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norm and an
    identity (or 1x1 projection) shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.short is None else self.short(x)))


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2015): a 7x7 stem, four stages of two basic
    blocks (64, 128, 256, 512 channels), global average pooling and a
    linear classifier; 11.7M parameters at 1000 classes."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages += [_Block(cin, cout, stride), _Block(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


MODELS = {"resnet18": ResNet18}


# -- samples to tensors ---------------------------------------------------


class ToTensors:
    """Collates samples (dicts of decoded columns) into (images, labels):
    images float32 [B, 3, S, S] in [0, 1], labels int64 [B]."""

    def __init__(self, size, num_classes):
        self.size = size
        self.num_classes = num_classes

    def image(self, sample):
        s = self.size
        for v in sample.values():
            if hasattr(v, "convert") and hasattr(v, "resize"):  # a PIL image
                a = np.asarray(v.convert("RGB").resize((s, s)), dtype=np.uint8)
                return torch.from_numpy(a.copy()).permute(2, 0, 1)
        for v in sample.values():
            if isinstance(v, np.ndarray) or isinstance(v, (bytes, bytearray, memoryview)):
                raw = np.frombuffer(v.tobytes() if isinstance(v, np.ndarray) else bytes(v), dtype=np.uint8)
                out = np.zeros(3 * s * s, dtype=np.uint8)
                n = min(len(raw), len(out))
                out[:n] = raw[:n]
                return torch.from_numpy(out).view(3, s, s)
        return torch.zeros(3, s, s, dtype=torch.uint8)

    def label(self, sample):
        for k in _LABELS:
            v = sample.get(k)
            if v is not None:
                try:
                    return int(v) % self.num_classes
                except (TypeError, ValueError):
                    pass
        return 0

    def __call__(self, samples):
        x = torch.stack([self.image(s) for s in samples]).float().div_(255.0)
        y = torch.tensor([self.label(s) for s in samples], dtype=torch.int64)
        return x, y


class FilesDataset(torch.utils.data.Dataset):
    """One file per sample (the exported records), decoded with the
    dataset's record decoder."""

    def __init__(self, paths, decoder):
        self.paths = paths
        self.decoder = decoder

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return self.decoder(f.read())


# -- loaders --------------------------------------------------------------


def _sluice_loader(cfg, collate):
    import sluice

    ds = sluice.StreamingDataset(remote=cfg["remote"], local=cfg["local"], batch_size=cfg["batch_size"],
                                 shuffle=cfg["shuffle"], shuffle_seed=cfg["shuffle_seed"],
                                 cache_limit=cfg.get("cache_limit") or None)
    loader = sluice.StreamingDataLoader(ds, batch_size=cfg["batch_size"], num_workers=cfg["workers"],
                                        collate_fn=collate, drop_last=False)
    return loader, ds


def _files_loader(cfg, collate):
    import sluice
    from sluice import _decode

    # The schema comes from the dataset itself (opened, never iterated).
    ds = sluice.StreamingDataset(remote=cfg["remote"], local=cfg["local"], batch_size=cfg["batch_size"])
    decoder = _decode.record_decoder(ds._info["schemas"][0], False)
    names = sorted(os.listdir(cfg["files"]))
    paths = [os.path.join(cfg["files"], n) for n in names]
    g = torch.Generator()
    g.manual_seed(cfg["shuffle_seed"])
    loader = torch.utils.data.DataLoader(FilesDataset(paths, decoder), batch_size=cfg["batch_size"],
                                         shuffle=cfg["shuffle"], generator=g, num_workers=cfg["workers"],
                                         collate_fn=collate)
    return loader, None


def _mosaicml_loader(cfg, collate):
    try:
        import streaming
    except ImportError as e:
        return None, "MosaicML's streaming package is not importable by %s (%s); pip install mosaicml-streaming" % (
            sys.executable, e)
    remote = cfg["remote"]
    if remote.startswith("file://"):
        remote = remote[len("file://"):]
    ds = streaming.StreamingDataset(remote=remote, local=cfg["local"], batch_size=cfg["batch_size"],
                                    shuffle=cfg["shuffle"], shuffle_seed=cfg["shuffle_seed"])
    loader = streaming.StreamingDataLoader(ds, batch_size=cfg["batch_size"], num_workers=cfg["workers"],
                                           collate_fn=collate)
    return loader, None


# -- the loop -------------------------------------------------------------


def device_for(want):
    """The device to train on: cuda when asked for or ("auto") when torch
    sees a GPU, else cpu."""
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SystemExit("sluice bench: --torch-device cuda, but torch sees no GPU")
        return torch.device("cuda")
    return torch.device("cpu")


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run(cfg):
    torch.manual_seed(cfg.get("seed", 0))
    threads = cfg.get("torch_threads")
    if threads:
        torch.set_num_threads(int(threads))
    dev = device_for(cfg.get("device", "auto"))
    model = MODELS[cfg["model"]](num_classes=cfg["num_classes"]).to(dev)
    if dev.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.get("lr", 0.1), momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    collate = ToTensors(cfg["image_size"], cfg["num_classes"])
    mode = cfg["mode"]
    if mode == "sluice":
        loader, ds = _sluice_loader(cfg, collate)
    elif mode == "files":
        loader, ds = _files_loader(cfg, collate)
    elif mode == "mosaicml":
        loader, why = _mosaicml_loader(cfg, collate)
        if loader is None:
            emit({"skipped": why})
            return
        ds = None
    else:
        raise SystemExit("sluice bench: unknown loader mode %r" % mode)
    model.train()
    max_steps = cfg.get("max_steps") or 0
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    steps = samples = 0
    wait_total = 0.0
    first = None
    before = ds.metrics() if mode == "sluice" else None
    begin = time.monotonic()
    it = iter(loader)
    while not max_steps or steps < max_steps:
        t0 = time.monotonic()
        try:
            x, y = next(it)
        except StopIteration:
            break
        t1 = time.monotonic()
        if first is None:
            first = t1 - begin
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        if dev.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sync()  # the step's GPU work belongs to the step, not to the next wait
        t2 = time.monotonic()
        n = int(y.shape[0])
        emit({"step": steps, "t": t0 - begin, "wait": t1 - t0, "compute": t2 - t1, "samples": n,
              "loss": float(loss.detach())})
        wait_total += t1 - t0
        steps += 1
        samples += n
    wall = time.monotonic() - begin
    summary = {"samples": samples, "steps": steps, "wall": wall, "first_batch": first or 0.0,
               "wait": wait_total, "device": str(dev), "model": cfg["model"],
               "torch": torch.__version__}
    if dev.type == "cuda":
        summary["gpu"] = torch.cuda.get_device_name(dev)
    if before is not None:
        m = loader.metrics()
        summary["metrics"] = m
        # The agent's counters are cumulative over the runs it served.
        summary["bytes_fetched"] = m["sluice/bytes_fetched"] - before["sluice/bytes_fetched"]
    stop = getattr(it, "close", None) or getattr(it, "_shutdown_workers", None)
    if stop is not None:
        stop()  # the workers end now, not at exit
    emit({"summary": summary})


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: python -m sluice._benchtorch CONFIG_JSON")
    run(json.loads(argv[1]))


if __name__ == "__main__":
    # Run from the module imported by name, so DataLoader workers unpickle
    # ToTensors and FilesDataset as sluice._benchtorch's, not __main__'s.
    from sluice import _benchtorch

    _benchtorch.main(sys.argv)
