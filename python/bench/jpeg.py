"""Image decode in one run on this machine: the decode ceiling of issue 17
and the pipelines that approach it, side by side.

    /usr/bin/python3 python/bench/jpeg.py [--images 256] [--seconds 3] [--feed 1024]

The transform is the ImageNet training one: decode + RandomResizedCrop(224)
+ horizontal flip -> uint8 (3, 224, 224).

1. Per core: PIL in one process (the ceiling's unit), PIL with draft()
   (DCT-reduced decoding where the crop allows it; with its pixel error
   against the full decode), and the Go decoders of package vision on one
   goroutine: pure Go and libjpeg-turbo (vision/libjpeg, -tags libjpeg),
   with and without DCT scaling. Decode only and decode + crop + flip.
2. The ceiling: PIL single-process images per CPU second x cores.
3. All cores: PIL through StreamingDataLoader's threaded feed (the
   transform in the collate function, threads = cores) and the Go decoders
   on all cores (vision.Decoder.DecodeBatch), as images/s and % of the
   ceiling, and images per CPU second of every process involved (this one,
   the agent): on a shared machine the wall rate depends on the load, the
   CPU rate much less. Also the agent decoding (sluice.DecodeImage through
   the shared-memory feed), the default static agent (pure Go) and one
   built with -tags libjpeg.

Every figure has a guard: the images counted and the sum of their ids must
be the pass's, so nothing wins by skipping. The Go figures need the source
tree and a Go toolchain (they build vision/internal/jpegbench); the
libjpeg ones also libjpeg-turbo's headers (libjpeg62-turbo-dev).
"""

import argparse
import io
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import _build  # noqa: E402 (python/bench, the script's directory)


def make_jpegs(n, w=500, h=375, quality=75, seed=0):
    """n distinct photo-like 500x375 JPEGs of about 20 KB (smooth colour
    fields, edges and a little noise)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    x = np.arange(w)[None, :] / w
    y = np.arange(h)[:, None] / h
    out = []
    for i in range(n):
        a, b, c = rng.uniform(1, 9, 3)
        img = np.stack([127 + 110 * np.sin(a * x + b * y), 127 + 110 * np.cos(b * x * y + c * x),
                        127 + 110 * np.sin(c * y + a * x * x)], -1)
        img[np.broadcast_to((x * 7 + y * 3 + i / 7) % 1 < 0.08, (h, w))] = 30  # stripes: edges
        img += rng.normal(0, 0.8, (h, w, 3))
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


def rrc_box(W, H, rnd, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params (torchvision is not
    installed here): (left, top, right, bottom)."""
    area = W * H
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        t = area * rnd.uniform(*scale)
        ar = math.exp(rnd.uniform(*lr))
        w, h = int(round(math.sqrt(t * ar))), int(round(math.sqrt(t / ar)))
        if 0 < w <= W and 0 < h <= H:
            i, j = rnd.randint(0, H - h), rnd.randint(0, W - w)
            return (j, i, j + w, i + h)
    return (0, 0, W, H)


def pil_rrc(src, rnd, draft=False, size=224):
    """decode + RandomResizedCrop + flip with PIL -> uint8 HWC array; with
    draft, decode at the smallest 1/2^k scale that still gives the crop at
    least the output size (PIL's draft() chooses k, libjpeg decodes in the
    DCT domain)."""
    import numpy as np
    from PIL import Image

    img = Image.open(io.BytesIO(src))
    W, H = img.size
    box = rrc_box(W, H, rnd)
    if draft:
        cw, ch = box[2] - box[0], box[3] - box[1]
        img.draft("RGB", (max(1, W * size // cw), max(1, H * size // ch)))
        f = img.size[0] / W
        box = tuple(v * f for v in box)
    img = img.convert("RGB").resize((size, size), Image.BILINEAR, box=box)
    if rnd.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(img)


def pil_decode(src):
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(src)).convert("RGB"))


def per_core_pil(jpegs, fn, seconds):
    """Runs fn over the images for about `seconds`: images per CPU second
    of this process (one core's rate on a shared machine), guarded."""
    n = ids = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds or n < len(jpegs):
        i = n % len(jpegs)
        fn(jpegs[i], i)
        n += 1
        ids += i
    cpu = time.process_time() - c0
    want = sum(k % len(jpegs) for k in range(n))
    if ids != want:
        raise SystemExit("guard failed: PIL id sum %d, want %d" % (ids, want))
    return n / cpu, n / (time.perf_counter() - t0), "%d / %d" % (n, ids)


def draft_error(jpegs, count=64):
    """Mean and largest absolute pixel difference of draft decoding against
    the full decode, same crop and flip, over `count` samples; and the
    share of samples where draft() reduced the decode at all."""
    import numpy as np

    tot = most = reduced = 0
    for i in range(count):
        a = pil_rrc(jpegs[i % len(jpegs)], random.Random(i)).astype(np.int16)
        b = pil_rrc(jpegs[i % len(jpegs)], random.Random(i), draft=True).astype(np.int16)
        d = np.abs(a - b)
        tot += float(d.mean())
        most = max(most, int(d.max()))
        reduced += int(d.max() > 0)
    return tot / count, most, reduced / count


# -- Go ---------------------------------------------------------------------


def build_jpegbench(work):
    """Builds vision/internal/jpegbench without and with -tags libjpeg:
    {"go": path, "libjpeg": path}, those that built."""
    out = {}
    if shutil.which("go") is None or not os.path.exists(os.path.join(ROOT, "go.mod")):
        return out
    for name, tags in (("go", []), ("libjpeg", ["-tags", "libjpeg"])):
        exe = os.path.join(work, "jpegbench-" + name)
        env = dict(os.environ, CGO_ENABLED="1" if tags else "0")
        r = subprocess.run(["go", "build"] + tags + ["-o", exe, "./vision/internal/jpegbench"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == 0:
            out[name] = exe
        else:
            print("  (jpegbench %s did not build: %s)" % (name, r.stdout.strip().splitlines()[-1:]))
    return out


def go_run(exe, d, n, workers, transform, passes, full=False):
    args = [exe, "-dir", d, "-workers", str(workers), "-transform", transform, "-passes", str(passes)]
    if full:
        args.append("-full-decode")
    r = json.loads(subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout)
    want = passes * n * (n - 1) // 2
    if r["images"] != passes * n or r["id_sum"] != want:
        raise SystemExit("guard failed: %s decoded %d images (want %d), id sum %d (want %d)"
                         % (exe, r["images"], passes * n, r["id_sum"], want))
    return r["images"] / r["cpu_s"], r["images"] / r["wall_s"], "%d / %d" % (r["images"], r["id_sum"])


# -- the threaded feed --------------------------------------------------------


def cpu_now():
    import helpers

    return helpers.cpu_with_agent(os.environ["SLUICE_AGENT_DIR"])


def feed_rate(d, n, threads, repeat, how, full=False):
    """decode + crop + flip through StreamingDataLoader's threaded feed:
    how="collate": PIL in the collate function; "agent": the agent's image
    transform through the shared-memory feed (DecodeImage,
    SLUICE_IMAGE_DECODE=agent); "pil": DecodeImage decoded with PIL in the
    feed's threads (SLUICE_IMAGE_DECODE=pil); "auto": DecodeImage with
    every setting at its default (the path the agent's build makes auto
    choose). (images/s, CPU seconds per image of this process and the
    agent, whether the agent decoded, the guard "images / id sum"),
    guarded."""
    import numpy as np
    import torch

    import sluice
    from sluice import _feed, _shm

    def collate(samples):
        rnd = random.Random(int(samples[0]["id"]))
        arr = np.stack([pil_rrc(s["img"], rnd) for s in samples])
        return {"img": torch.from_numpy(arr).permute(0, 3, 1, 2), "id": torch.tensor([int(s["id"]) for s in samples])}

    best = (0.0, 0.0, None, None)
    saved = os.environ.get("SLUICE_IMAGE_DECODE")
    os.environ["SLUICE_IMAGE_DECODE"] = how if how in ("agent", "pil") else "auto"
    try:
        for _ in range(repeat):
            kw = {}
            if how != "collate":
                kw["decode_images"] = sluice.DecodeImage("img", size=224, flip=True, full_decode=full)
            ds = sluice.StreamingDataset(local=d, batch_size=32, shuffle=True, **kw)
            chose = _shm.agent_decodes(ds)
            lkw = {"collate_fn": collate} if how == "collate" else {}
            loader = sluice.StreamingDataLoader(ds, batch_size=32, num_workers=threads, **lkw)
            t0, c0 = time.perf_counter(), cpu_now()
            cnt = s = 0
            src = _feed.batches(loader) if how == "collate" else ((None, b) for b in loader)
            for _, b in src:
                if tuple(b["img"].shape[1:]) != (3, 224, 224) or b["img"].dtype != torch.uint8:
                    raise SystemExit("guard failed: batch of %s %s" % (tuple(b["img"].shape), b["img"].dtype))
                cnt += len(b["id"])
                s += int(b["id"].sum())
            wall, cpu = time.perf_counter() - t0, cpu_now() - c0
            if cnt != n or s != n * (n - 1) // 2:
                raise SystemExit("guard failed: feed gave %d images (want %d), id sum %d" % (cnt, n, s))
            best = max(best, (cnt / wall, cpu / cnt, chose, "%d / %d" % (cnt, s)), key=lambda r: r[0])
    finally:
        if saved is None:
            os.environ.pop("SLUICE_IMAGE_DECODE", None)
        else:
            os.environ["SLUICE_IMAGE_DECODE"] = saved
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=256, help="distinct JPEGs")
    ap.add_argument("--seconds", type=float, default=3.0, help="per PIL per-core figure")
    ap.add_argument("--passes", type=int, default=4, help="passes over the images per Go figure")
    ap.add_argument("--feed", type=int, default=1024, help="samples through the threaded feed (0: skip)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the best counts")
    args = ap.parse_args()
    cores = os.cpu_count()
    work = tempfile.mkdtemp(prefix="sluice-jpegbench-")
    os.environ.setdefault("SLUICE_AGENT_DIR", os.path.join(work, "agent"))
    try:
        jpegs = make_jpegs(args.images)
        d = os.path.join(work, "img")
        os.makedirs(d)
        for i, b in enumerate(jpegs):
            with open(os.path.join(d, "%d.jpg" % i), "wb") as f:
                f.write(b)
        print("load average %.2f, %d CPUs; %d JPEGs 500x375, %.1f KB each on average"
              % (os.getloadavg()[0], cores, len(jpegs), sum(map(len, jpegs)) / len(jpegs) / 1e3))
        exes = build_jpegbench(work)

        def best(fn):
            return max((fn() for _ in range(args.repeat)), key=lambda r: r[0])

        print("\n1. per core (images per CPU second; best of %d)" % args.repeat)
        print("  %-40s %10s %10s" % ("decoder", "decode", "decode+rrc224+flip"))
        rows = []
        pil_dec = best(lambda: per_core_pil(jpegs, lambda b, i: pil_decode(b), args.seconds))
        pil_rrc_ = best(lambda: per_core_pil(jpegs, lambda b, i: pil_rrc(b, random.Random(i)), args.seconds))
        pil_draft = best(lambda: per_core_pil(jpegs, lambda b, i: pil_rrc(b, random.Random(i), draft=True), args.seconds))
        rows.append(("PIL %s (single process)" % __import__("PIL").__version__, pil_dec[0], pil_rrc_[0]))
        rows.append(("PIL + draft() where the crop allows", None, pil_draft[0]))
        go_one = {}
        for name, exe in sorted(exes.items()):
            dec = best(lambda: go_run(exe, d, len(jpegs), 1, "decode", args.passes))
            rrc = best(lambda: go_run(exe, d, len(jpegs), 1, "rrc", args.passes))
            go_one[name] = rrc[0]
            label = "Go vision, pure Go" if name == "go" else "Go vision, libjpeg-turbo (DCT scaling)"
            rows.append((label, dec[0], rrc[0]))
            if name == "libjpeg":
                full = best(lambda: go_run(exe, d, len(jpegs), 1, "rrc", args.passes, full=True))
                rows.append(("Go vision, libjpeg-turbo (full decode)", None, full[0]))
        for label, dec, rrc in rows:
            print("  %-40s %10s %10.0f   (%.2f x PIL)" % (label, "%.0f" % dec if dec else "-", rrc, rrc / pil_rrc_[0]))
        mean, most, share = draft_error(jpegs)
        print("  draft() vs full decode, same crop: mean |diff| %.3f, max %d, %.0f%% of samples reduced"
              % (mean, most, 100 * share))

        ceiling = pil_rrc_[0] * cores
        print("\n2. decode ceiling: PIL single process %.0f img/s per CPU second x %d cores = %.0f img/s"
              " (guard: images / id sum %s)" % (pil_rrc_[0], cores, ceiling, pil_rrc_[2]))

        print("\n3. all cores (images/s, best of %d)" % args.repeat)
        print("  %-40s %10s %10s %10s  %s" % ("pipeline", "images/s", "of ceiling", "img/CPU-s", "guard: images / id sum"))
        if args.feed > 0:
            import helpers  # noqa: F401  (binary, agent dir)
            import mdswrite

            _build.sluice_binary(work)
            di = os.path.join(work, "mds")
            m = args.feed
            mdswrite.write(di, {"id": "int", "img": "bytes"}, ({"id": i, "img": jpegs[i % len(jpegs)]} for i in range(m)),
                           size_limit=1 << 26)
            rate, cpu, _, guard = feed_rate(di, m, cores, args.repeat, "collate")
            print("  %-40s %10.0f %9.0f%% %10.0f  %s" % ("PIL in the threaded feed (%d threads)" % cores, rate,
                                                        100 * rate / ceiling, 1 / cpu, guard))
            # DecodeImage with each build of the agent (the default static
            # one, pure Go, and one built with -tags libjpeg): the agent's
            # decode, PIL in the feed's threads, and what auto chose (from
            # the decoder the agent announces), interleaved in one run.
            agents = [("pure Go", helpers.binary())]
            if "libjpeg" in exes:
                exe = os.path.join(work, "sluice-libjpeg")
                r = subprocess.run(["go", "build", "-tags", "libjpeg", "-o", exe, "./cmd/sluice"], cwd=ROOT)
                if r.returncode == 0:
                    agents.append(("libjpeg-turbo", exe))
            saved = os.environ.get("SLUICE_BIN"), os.environ["SLUICE_AGENT_DIR"]
            for k, (label, exe) in enumerate(agents):
                helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
                os.environ["SLUICE_BIN"] = exe
                os.environ["SLUICE_AGENT_DIR"] = os.path.join(work, "agent-%d" % k)
                rows = [("agent decode (%s), shm feed" % label, "agent", False),
                        ("agent decode (%s), full_decode" % label, "agent", True),
                        ("DecodeImage with PIL, threaded feed", "pil", False),
                        ("auto with the %s agent" % label, "auto", False)]
                try:
                    for name, how, full in rows:
                        rate, cpu, chose, guard = feed_rate(di, m, cores, args.repeat, how, full)
                        if how == "auto":
                            name += " -> %s" % ("agent" if chose else "PIL")
                        print("  %-40s %10.0f %9.0f%% %10.0f  %s" % (name, rate, 100 * rate / ceiling, 1 / cpu, guard))
                finally:
                    helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
            os.environ["SLUICE_AGENT_DIR"] = saved[1]
            if saved[0] is None:
                os.environ.pop("SLUICE_BIN", None)
            else:
                os.environ["SLUICE_BIN"] = saved[0]
        for name, exe in sorted(exes.items()):
            r = best(lambda: go_run(exe, d, len(jpegs), 0, "rrc", args.passes))
            label = "Go vision %s, %d goroutines" % ("pure Go" if name == "go" else "libjpeg-turbo", cores)
            print("  %-40s %10.0f %9.0f%% %10.0f  %s" % (label, r[1], 100 * r[1] / ceiling, r[0], r[2]))
    finally:
        try:
            import helpers

            helpers.stop_agent(os.environ["SLUICE_AGENT_DIR"])
        except Exception:
            pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
