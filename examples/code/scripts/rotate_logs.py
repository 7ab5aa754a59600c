"""Rotate the shipper's log files: keep the newest N, compress the rest."""
import gzip
import os
import shutil
import sys


def rotate(folder, keep=7):
    logs = sorted(f for f in os.listdir(folder) if f.endswith(".log"))
    for name in logs[:-keep]:
        path = os.path.join(folder, name)
        with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(path)


if __name__ == "__main__":
    rotate(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
