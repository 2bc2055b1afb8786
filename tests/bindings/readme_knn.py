import numpy as np
import wort.knn

points = np.random.default_rng(1).normal(size=(20_000, 64)).astype(np.float32)
wort.knn.build("vectors.pool", points, name="v")             # k-means build, degree 128
with wort.knn.open("vectors.pool", name="v") as tree:
    ids, dists = tree.search(points[:10], k=32)               # PSB on the CPU, all cores
    print(ids[0][0], tree.last_counters)                      # point 0 is its own nearest
