"""Who decodes decode_images (sluice._shm.agent_decodes): the agent says
which image decoder it was built with in its hello (features), and
SLUICE_IMAGE_DECODE=auto picks the faster path itself: the agent's
"image" transform when it has libjpeg-turbo, PIL in the threaded feed
when it is the default pure-Go build or an agent that does not say (an
older release). Tested with both builds of the agent (the libjpeg one
built here when libjpeg-turbo's headers are installed, as in CI): which
path ran, and that the pixels are identical either way (full_decode=True:
libjpeg's full decode is PIL's), also across a resume that switches
agents mid-epoch."""

import glob
import os
import shutil
import unittest

import helpers
import mdswrite
from test_image import BS, Env, Spy, jpeg

try:
    import numpy as np
    import torch
except ImportError:  # pragma: no cover
    torch = np = None

import sluice
from sluice import _shm

N = 48


def libjpeg_agent():
    """A sluice binary built with -tags libjpeg, or (None, why not)."""
    if not glob.glob("/usr/include/jpeglib.h") and not glob.glob("/usr/include/*/jpeglib.h"):
        return None, "libjpeg-turbo's headers are not installed (libjpeg62-turbo-dev)"
    if shutil.which("go") is None:
        return None, "no Go toolchain to build the libjpeg agent"
    # With the headers present a failed build is a failure, not a skip.
    out = helpers.build_binary("sluice-libjpeg", tags=("libjpeg",), env=dict(os.environ, CGO_ENABLED="1"))
    return out, None


class FakeConn:
    def __init__(self, features):
        self.features = frozenset(features)


@unittest.skipIf(torch is None, "needs torch, numpy and Pillow")
class ImageDecoderChoiceTest(helpers.AgentCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.data = os.path.join(cls.tmp, "img")
        mdswrite.write(cls.data, {"id": "int", "img": "jpeg"}, ({"id": i, "img": jpeg(i)} for i in range(N)),
                       size_limit=1 << 14)
        cls.go_bin = helpers.binary()
        cls.jpeg_bin, cls.why = libjpeg_agent()

    def agent(self, build):
        """Env for an agent of that build ("go" or "libjpeg"), in a
        directory of its own."""
        if build == "libjpeg" and self.jpeg_bin is None:
            self.skipTest(self.why)
        d = os.path.join(self.tmp, "agent-" + build)
        self.addCleanup(helpers.stop_agent, d)
        return Env(SLUICE_BIN=self.go_bin if build == "go" else self.jpeg_bin, SLUICE_AGENT_DIR=d)

    def dataset(self, full_decode=True):
        d = sluice.DecodeImage("img", size=(24, 32), flip=True, seed=3, full_decode=full_decode)
        return sluice.StreamingDataset(local=self.data, batch_size=BS, shuffle=True, decode_images=d)

    def epoch(self, build, workers=2, full_decode=True, ds=None, stop_after=None):
        """({id: pixels}, samples PIL decoded here, whether auto chose the
        agent, loader) of one epoch (or its first stop_after batches) with
        every setting at its default."""
        got = {}
        with self.agent(build), Env(SLUICE_FEED="auto", SLUICE_SHM="auto", SLUICE_IMAGE_DECODE="auto"), Spy() as spy:
            ds = ds or self.dataset(full_decode)
            chose = _shm.agent_decodes(ds)
            loader = sluice.StreamingDataLoader(ds, batch_size=BS, num_workers=workers)
            for k, b in enumerate(loader):
                self.assertEqual(b["img"].dtype, torch.uint8)
                self.assertEqual(tuple(b["img"].shape[1:]), (3, 24, 32))
                for i, sid in enumerate(b["id"].tolist()):
                    self.assertNotIn(sid, got)
                    got[sid] = b["img"][i].numpy().copy()
                if stop_after is not None and k + 1 == stop_after:
                    break
        return got, spy.n, chose, loader

    def test_handshake_names_the_decoder(self):
        for build, want in (("go", _shm.IMAGE_GO), ("libjpeg", _shm.IMAGE_LIBJPEG)):
            with self.agent(build):
                ds = self.dataset()
                self.assertIn(want, ds._conn.features, build)
                self.assertEqual(_shm.agent_decodes(ds), build == "libjpeg")

    def test_auto_rules(self):
        ds = self.dataset()
        with Env(SLUICE_IMAGE_DECODE="auto"):
            # An agent of an older release says nothing: PIL, which is
            # faster than the pure-Go decoders it has by default.
            self.assertFalse(_shm.agent_decodes(ds, FakeConn([])))
            self.assertFalse(_shm.agent_decodes(ds, FakeConn([_shm.IMAGE_GO, "something-new"])))
            self.assertTrue(_shm.agent_decodes(ds, FakeConn([_shm.IMAGE_LIBJPEG])))
            self.assertIsNone(_shm.transforms(ds, FakeConn([_shm.IMAGE_GO])))
            self.assertEqual(_shm.transforms(ds, FakeConn([_shm.IMAGE_LIBJPEG]))[0]["transform"], "image")
        with Env(SLUICE_IMAGE_DECODE="agent"):
            self.assertTrue(_shm.agent_decodes(ds, FakeConn([])))
        with Env(SLUICE_IMAGE_DECODE="pil"):
            self.assertFalse(_shm.agent_decodes(ds, FakeConn([_shm.IMAGE_LIBJPEG])))
        with Env(SLUICE_IMAGE_DECODE="gpu"):
            with self.assertRaisesRegex(ValueError, "SLUICE_IMAGE_DECODE"):
                _shm.agent_decodes(ds, FakeConn([]))
        # A feed transform that is not decode_images' is the agent's.
        other = self.dataset()
        other._decode_images = []
        other._feed_transforms = [{"column": "img", "transform": "x"}]
        self.assertTrue(_shm.agent_decodes(other, FakeConn([])))

    def test_each_build_takes_its_path_with_the_same_pixels(self):
        py, py_n, py_chose, _ = self.epoch("go")
        self.assertFalse(py_chose)
        self.assertEqual(sorted(py), list(range(N)))
        self.assertEqual(py_n, N, "the pure-Go agent's run did not decode with PIL here")
        ag, ag_n, ag_chose, _ = self.epoch("libjpeg")
        self.assertTrue(ag_chose)
        self.assertEqual(sorted(ag), list(range(N)))
        self.assertEqual(ag_n, 0, "the libjpeg agent's run decoded in Python: the agent did not")
        for sid in range(N):
            np.testing.assert_array_equal(ag[sid], py[sid], "sample %d: libjpeg agent vs PIL" % sid)
        # Augmented: the crops differ between samples.
        self.assertGreater(len({py[s].tobytes() for s in range(N)}), N - 2)
        # torch's own loop (no workers) decodes with PIL on either agent.
        p0, n0, _, _ = self.epoch("libjpeg", workers=0)
        self.assertEqual(n0, N)
        for sid in range(N):
            np.testing.assert_array_equal(p0[sid], py[sid], "sample %d at 0 workers" % sid)

    def test_default_scaling_differs_by_levels_only(self):
        # full_decode=False lets the libjpeg agent decode at a DCT scale,
        # which PIL cannot: the same crop and flip, a few levels apart.
        py, _, _, _ = self.epoch("go", full_decode=False)
        ag, ag_n, _, _ = self.epoch("libjpeg", full_decode=False)
        self.assertEqual(ag_n, 0)
        self.assertEqual(sorted(ag), sorted(py))
        for sid in range(N):
            d = np.abs(ag[sid].astype(int) - py[sid].astype(int))
            self.assertLess(d.mean(), 4, "sample %d: mean difference %.2f" % (sid, d.mean()))

    def test_resume_across_the_choice(self):
        # Half an epoch on the libjpeg agent (the agent decodes), resumed
        # on the pure-Go one (PIL decodes), and the other way round: every
        # sample once, each with the pixels of an uninterrupted run.
        full, _, _, _ = self.epoch("go")
        for first, then in (("libjpeg", "go"), ("go", "libjpeg")):
            part, _, _, loader = self.epoch(first, stop_after=3)
            state = loader.state_dict()
            with self.agent(then):
                ds = self.dataset()
            ds.load_state_dict(state)
            rest, _, _, _ = self.epoch(then, ds=ds)
            self.assertEqual(len(part) + len(rest), N, (first, then))
            self.assertEqual(set(part) | set(rest), set(range(N)))
            for sid, a in list(part.items()) + list(rest.items()):
                np.testing.assert_array_equal(a, full[sid], "sample %d, %s then %s" % (sid, first, then))


if __name__ == "__main__":
    unittest.main()
