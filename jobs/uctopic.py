"""UCTopic: contrastive phrase representations and topic mining, on Ray.

    python jobs/uctopic.py pretrain --set evaluation.conll=../shared/data/ner/conll2003/eng.testb
    python jobs/uctopic.py finetune --set model=runs/uctopic-pretrain/model --set finetune.data.conll=...
    python jobs/uctopic.py mine --set mine.data.documents=my_docs/ --set model=runs/uctopic-finetune/model
    ray job submit -- python jobs/uctopic.py pretrain --config configs/uctopic_pretrain.yaml --set train.scaling.use_gpu=true
"""

import sys

from contrastext.pipelines.uctopic import main

if __name__ == "__main__":
    sys.exit(main())
