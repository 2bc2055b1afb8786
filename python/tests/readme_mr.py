from distributed import Client, LocalCluster
from wort.mr import EclipseMR, data, get_app

ds = data.gen_text("text-input", blocks=4, lines=200, seed=1)  # block files + _manifest.json
with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster, Client(cluster) as client:
    # an existing cluster instead: Client("tcp://scheduler-host:8786")
    mr = EclipseMR(client, cache_dir="wort-mr-cache")  # each worker's pool: wort-mr-cache/<name>.pool
    counts = mr.run(get_app("wordcount"), ds)
    print(sorted(counts.items(), key=lambda kv: -kv[1])[:3])
