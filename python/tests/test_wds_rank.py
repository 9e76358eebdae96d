"""One training rank over a sluice.WebDataset, run as its own process by
test_wds_dist (not a test module itself: it defines no TestCase).

argv[1] is a JSON object: remote, local, cache_size, batch_size, workers
(DataLoader worker counts, one job each), job, out, and optionally resume
(a state dict) and stop_after (batches, then save the state).
"""

import json
import os
import sys
import warnings

if __name__ == "__main__":
    import helpers  # noqa: F401  (sets sys.path)
    import sluice


def main():
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    cfg = json.loads(sys.argv[1])
    result = {}
    for w in cfg["workers"]:
        os.environ["SLUICE_JOB"] = "%s-w%d" % (cfg["job"], w)
        ds = sluice.WebDataset(cfg["remote"], shardshuffle=True, shuffle_seed=17, cache_dir=cfg["local"],
                               cache_size=cfg["cache_size"], batch_size=cfg["batch_size"], timeout=60)
        pipe = ds.decode().to_tuple("__key__", "cls", "jpg")
        loader = sluice.StreamingDataLoader(pipe, batch_size=cfg["batch_size"], num_workers=w)
        if cfg.get("resume"):
            loader.load_state_dict(cfg["resume"])
        batches, state = [], None
        for keys, cls, jpg in loader:
            for k, c, j in zip(keys, cls.tolist(), jpg):
                if k != "s%06d" % c or len(j) != 3000 + c % 7:
                    raise SystemExit("sample %s: cls %d, %d bytes" % (k, c, len(j)))
            batches.append(cls.tolist())
            if cfg.get("stop_after") and len(batches) == cfg["stop_after"]:
                state = loader.state_dict()
                break
        result[str(w)] = {"batches": batches, "state": state}
    with open(cfg["out"] + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(cfg["out"] + ".tmp", cfg["out"])


if __name__ == "__main__":
    main()
