"""README's "Library use" examples, run as written (one namespace, block after block, in a fresh folder),
with the tiny random encoder in place of ``bundled:minilm`` so that four trainings fit in a test."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "### Library use"


def library_use_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start)
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.DOTALL)


def test_the_section_has_a_block_per_facade_of_at_most_five_lines():
    blocks = library_use_blocks()
    assert len(blocks) == 5  # the shared data, then one block per method
    for name in ("WCSBert", "SupConClassifier", "ShuffleDivide", "PhraseTopicModel"):
        (block,) = [b for b in blocks if f"from contrastext import {name}" in b]
        code = [line for line in block.splitlines() if line.strip() and not line.startswith(("from ", "import "))]
        assert len(code) <= 5, (name, code)


@pytest.mark.ray
@pytest.mark.slow
def test_the_library_use_examples_run(ray_session, tiny_encoder_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []  # what the blocks print (Ray's workers print to the same stdout)
    namespace: dict = {"print": lambda *values: printed.append(" ".join(str(v) for v in values))}
    for block in library_use_blocks():
        exec(compile(block.replace('"bundled:minilm"', repr(str(tiny_encoder_dir))), str(README), "exec"),
             namespace)
    texts, labels = namespace["texts"], namespace["labels"]
    assert len(texts) == len(labels) == 40

    model = namespace["model"]  # WCSBert, loaded back from its folder
    assert (tmp_path / "my-wcsbert" / "wcsbert.json").is_file() and (tmp_path / "my-wcsbert" / "modules.json").is_file()
    assert model.labels == ["Sports", "Science", "Business", "Politics"]
    assert set(model.predict(texts)) <= set(model.labels)

    classifier = namespace["classifier"]
    assert classifier.classes_ == sorted(set(labels)) and (tmp_path / "my-classifier" / "classifier.json").is_file()

    untrained, trained = namespace["shuffle_divide"].history_  # epoch 0 is the encoder before training
    assert trained["pairs"] == 40 and "pairs" not in untrained  # every text has four words to shuffle
    clusters = namespace["clusters"]
    assert clusters.shape == (40,) and set(clusters.tolist()) <= {0, 1, 2, 3}
    from contrastext import ShuffleDivide

    assert ShuffleDivide.load(tmp_path / "my-clusters").predict(texts).tolist() == clusters.tolist()

    topics = namespace["topics"]  # the agglomerative clusterer's topics
    assert topics.n_topics == 4 and sum(t.size for t in topics.topics) == topics.instances
    assigned = namespace["topic_model"].assign(texts[:5])  # kept topics, assigned to documents
    assert len(assigned) == 5 and all(d.topic is None or 0 <= d.topic < 4 for d in assigned)
    assert len(printed) == 3
    assert re.match(r"\['(Sports|Science|Business|Politics)'\] \[\[[01]\.", printed[0])  # WCSBert: label, proba
    assert re.fullmatch(r"\['(Sports|Science|Business|Politics)'\]", printed[1])  # the classifier's label
    assert printed[2].startswith("[[")  # top phrases per topic
