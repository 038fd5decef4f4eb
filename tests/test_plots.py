import numpy as np

from contrastext.plots import confusion_matrix_plot, metric_lines, project_2d, scatter_2d


def test_scatter_of_projected_clusters_writes_png(tmp_path):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (20, 8)), rng.normal(6, 1, (20, 8))])
    for method in ("pca", "tsne"):
        points = project_2d(x, method=method)
        assert points.shape == (40, 2)
        # the two well-separated groups stay apart in 2-D
        assert np.linalg.norm(points[:20].mean(0) - points[20:].mean(0)) > points[:20].std()
        path = scatter_2d(points, ["a"] * 20 + ["b"] * 20, tmp_path / f"{method}.png", method)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metric_lines_and_confusion_matrix(tmp_path):
    rows = [{"epoch": 0, "acc": 0.5, "nmi": None}, {"epoch": 1, "acc": 0.7, "nmi": 0.4}]
    assert metric_lines(rows, "epoch", ["acc", "nmi"], tmp_path / "m.png", "t").stat().st_size > 0
    cm = np.array([[5, 1], [2, 7]])
    assert confusion_matrix_plot(cm, ["x", "y"], tmp_path / "c.png", "t").stat().st_size > 0
