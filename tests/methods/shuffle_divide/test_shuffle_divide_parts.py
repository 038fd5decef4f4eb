"""ShuffleDivide's pluggable parts: the pair builder gives what is trained, the negatives rule's groups reach
NT-Xent, and the job builds its method from the same parts."""

import numpy as np
import pytest
from conftest import NEWS_DOCUMENTS

from contrastext import ShuffleDivide
from contrastext.config import LossConfig
from contrastext.data.documents import shuffle_divide_pairs, split_units, tfidf_neighbours, tfidf_pairs
from contrastext.data.pair_builders import PairBuilder, ShuffleDividePairs, TfidfNeighbourPairs
from contrastext.methods.shuffle_divide.config import default_shuffle_divide_train
from contrastext.methods.shuffle_divide.negatives import BatchNegatives, OtherClusterNegatives
from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig
from contrastext.pipelines.shuffle_divide import method_of


def test_the_builders_give_the_functions_pairs_and_say_what_they_found():
    sentences = [" ".join(f"Sentence {j} of document {i}." for j in range(i + 2)) for i in range(4)]
    builder = ShuffleDividePairs("sentence", min_units=3, seed=7)
    stats = builder.prepare(sentences)
    assert stats == {"method": "shuffle_divide", "unit": "sentence", "pairs": 3, "documents_too_short": 1,
                     "median_units": 3.5}
    expected = shuffle_divide_pairs(split_units(sentences, "sentence"), epoch=2, seed=7, min_units=3,
                                    groups=[0, 1, 0, 1])
    assert builder.pairs(2, groups=[0, 1, 0, 1]) == expected and len(expected) == 3
    assert builder.pairs(3) != builder.pairs(2)  # fresh halves every epoch

    tfidf = TfidfNeighbourPairs(chunk_rows=2, min_df=1)
    labels = ["sport", "sport", "money", "money", "tech", "tech"]
    stats = tfidf.prepare(NEWS_DOCUMENTS, labels=labels)
    reference = tfidf_neighbours(NEWS_DOCUMENTS, labels=labels, min_df=1)
    assert stats["pairs"] == 6 and stats["label_agreement"] == reference.label_agreement == 1.0
    assert tfidf.pairs(1) == tfidf.pairs(2) == tfidf_pairs(NEWS_DOCUMENTS, reference)
    assert isinstance(builder, PairBuilder) and isinstance(tfidf, PairBuilder)


def test_unprepared_or_unusable_builders_say_so():
    with pytest.raises(RuntimeError, match="prepare"):
        ShuffleDividePairs().pairs(1)
    with pytest.raises(RuntimeError, match="prepare"):
        TfidfNeighbourPairs().pairs(1)
    with pytest.raises(ValueError, match="min_units"):
        ShuffleDividePairs(min_units=1)
    with pytest.raises(ValueError, match="no training pairs"):
        ShuffleDividePairs(min_units=50).prepare(NEWS_DOCUMENTS)


class OneCluster:
    """Every document in cluster 0; records what it was given."""

    def __init__(self):
        self.seen: list[np.ndarray] = []

    def fit_predict(self, embeddings):
        self.seen.append(np.asarray(embeddings))
        return np.zeros(len(embeddings), dtype=int)


class EachWithACopy:
    """Pairs every document with a copy of itself under a heading (a builder written by a user); records the
    texts it was given."""

    def __init__(self):
        self.texts = None

    def prepare(self, texts, *, labels=None):
        self.texts = list(texts)
        return {"pairs": len(texts)}

    def pairs(self, epoch, *, ids=None, groups=None):
        return [{"anchor": t, "positive": f"News: {t}", "id": str(i), **({"group": int(groups[i])} if groups is not None else {})}
                for i, t in enumerate(self.texts)]


def test_negatives_rules_and_their_settings():
    assert BatchNegatives().groups(np.zeros((3, 2)), OneCluster()) is None
    own = OneCluster()
    assert OtherClusterNegatives(own).groups(np.ones((3, 2)), OneCluster()).tolist() == [0, 0, 0]
    assert len(own.seen) == 1  # its own clusterer, not the method's
    with pytest.raises(ValueError, match="ntxent"):
        mnr = default_shuffle_divide_train().model_copy(update={"loss": LossConfig(name="mnr")})
        ShuffleDivide(negatives=OtherClusterNegatives(), train=mnr)


def test_the_default_builders_settings_and_a_builder_are_not_given_together():
    with pytest.raises(ValueError, match="give them to it"):
        ShuffleDivide(pairs=TfidfNeighbourPairs(), shuffle_unit="word")
    seeded = default_shuffle_divide_train().model_copy(update={"seed": 2})
    default = ShuffleDivide(shuffle_unit="word", min_units=6, train=seeded).pairs
    assert isinstance(default, ShuffleDividePairs) and (default.unit, default.min_units, default.seed) == ("word", 6, 2)


def test_a_builder_that_drops_the_groups_is_told_what_is_missing():
    model = ShuffleDivide(negatives=OtherClusterNegatives())
    with pytest.raises(KeyError, match="group"):
        model.train_epoch([{"anchor": "a", "positive": "b", "id": "0"}], "unused", 1)


@pytest.mark.ray
@pytest.mark.slow
def test_a_users_pair_builder_is_what_is_trained_and_one_cluster_leaves_ntxent_no_negatives(ray_session,
                                                                                           tiny_encoder_dir):
    """All documents in one cluster mask every negative, so NT-Xent's loss is exactly 0 (with in-batch
    negatives it cannot be: each view has 2N-2 finite competitors)."""
    clusterer, builder = OneCluster(), EachWithACopy()
    train = default_shuffle_divide_train().model_copy(update={"batch_size": 3})
    model = ShuffleDivide(str(tiny_encoder_dir), epochs=1, pairs=builder, negatives=OtherClusterNegatives(),
                          clusterer=clusterer, train=train, encode_max_length=32)
    untrained = ShuffleDivide(str(tiny_encoder_dir), epochs=0, encode_max_length=32).fit(NEWS_DOCUMENTS)
    model.fit(NEWS_DOCUMENTS)
    assert builder.texts == NEWS_DOCUMENTS and model.pair_stats_ == {"pairs": 6}
    before, record = model.history_
    assert before["epoch"] == 0 and "loss" not in before
    assert record["pairs"] == 6 and record["steps"] == 2 and record["loss"] == 0.0
    # epoch 0's clusters (the documents under the starting model) were the groups; each epoch is clustered once
    before_training, after_training = clusterer.seen
    np.testing.assert_allclose(before_training, untrained.transform(NEWS_DOCUMENTS), atol=1e-5)
    # one cluster has no silhouette in any epoch: the last epoch is kept
    assert model.chosen_epoch_ == 1
    np.testing.assert_allclose(after_training, model.embeddings_, atol=1e-6)


def test_the_class_and_the_job_share_one_settings_object_and_its_defaults():
    from contrastext.methods.shuffle_divide.config import ShuffleDivideSettings

    job = ShuffleDivideConfig()
    model = ShuffleDivide()
    assert model.config == job.settings() == ShuffleDivideSettings()  # every default is the job's
    assert (model.epochs, model.max_length, model.batch_size, model.seed) == (
        job.epochs, job.encode_max_length, job.encode_batch_size, job.train.seed)
    given = ShuffleDivide(config=ShuffleDivideSettings(epochs=2, kmeans_niter=3), n_clusters=4, negatives="other_clusters")
    assert given.config.epochs == 2 and given.config.k == 4 and given.clusterer.niter == 3
    assert isinstance(given.negatives, OtherClusterNegatives)
    with pytest.raises(TypeError, match="max_length is encode_max_length"):
        ShuffleDivide(max_length=128)
    with pytest.raises(TypeError, match="unknown settings .'layers'.*pair_method"):
        ShuffleDivide(layers=2)
    with pytest.raises(TypeError, match="not both"):
        ShuffleDivide(n_clusters=3, k=4)
    assert ShuffleDivide(n_clusters=1, clusterer=OneCluster()).n_clusters == 1  # a clusterer's own business


def test_the_job_builds_its_method_from_the_same_parts():
    config = ShuffleDivideConfig(pair_method="tfidf", negatives="other_clusters", tfidf_chunk_rows=7,
                                 kmeans_niter=3)
    method = method_of(config, 4)
    assert isinstance(method.pairs, TfidfNeighbourPairs) and method.pairs.chunk_rows == 7
    assert isinstance(method.negatives, OtherClusterNegatives)
    assert method.clusterer.n_clusters == 4 and method.clusterer.niter == 3
    plain = method_of(ShuffleDivideConfig(shuffle_unit="word", min_units=5), 3)
    assert isinstance(plain.pairs, ShuffleDividePairs) and (plain.pairs.unit, plain.pairs.min_units) == ("word", 5)
    assert isinstance(plain.negatives, BatchNegatives)
    assert method.select_by == "tfidf_silhouette" and method_of(ShuffleDivideConfig(select_by="last"), 3).select_by == "last"


def test_a_saved_model_with_one_cluster_loads_and_assigns_every_document_to_it(tiny_encoder_dir, tmp_path):
    """A user's clusterer may put every document in one cluster: the saved model still loads."""
    import shutil

    from contrastext.methods.shuffle_divide.model import save_clusters

    folder = tmp_path / "one-cluster"
    shutil.copytree(tiny_encoder_dir, folder)
    width = ShuffleDivide(str(folder), epochs=0, encode_max_length=32).fit(NEWS_DOCUMENTS).embeddings_.shape[1]
    save_clusters(str(folder), np.ones((1, width), np.float32), max_length=32, batch_size=8)
    model = ShuffleDivide.load(folder)
    assert model.n_clusters == 1 and model.max_length == 32 and model.batch_size == 8
    assert model.predict(NEWS_DOCUMENTS).tolist() == [0] * len(NEWS_DOCUMENTS)
