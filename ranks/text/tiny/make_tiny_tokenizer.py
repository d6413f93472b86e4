"""Makes the built-in tiny tokenizer (spiece-tiny.model beside this file):
a SentencePiece unigram model of 320 pieces with T5's special ids (pad 0,
eos 1, unk 2, no bos) and no normalisation table (identity), trained on a
corpus of prompt-like sentences this script writes from the word lists
below. It exists so that the tiny text encoder (init --arch umt5-tiny)
can turn a prompt into tokens with nothing downloaded; it is no model of
any language.

  /usr/bin/python3 make_tiny_tokenizer.py        (needs sentencepiece)

The corpus comes from Python's random with a fixed seed and the trainer
runs on one thread in a scratch directory (the model records the names
of its input and output), so the same sentencepiece version writes the
same file wherever it runs (0.1.97 made the one here)."""
import os
import random
import shutil
import tempfile

import sentencepiece as spm

SUBJECTS = """fox cat dog horse bird eagle owl whale dolphin shark turtle rabbit deer wolf bear
tiger lion panda monkey elephant giraffe zebra penguin butterfly bee dragon robot astronaut
knight wizard child girl boy woman man grandmother grandfather dancer musician painter chef
surfer skier cyclist runner soldier pilot sailor farmer fisherman scientist teacher student
car train bicycle motorcycle boat ship airplane balloon rocket spaceship lighthouse castle
bridge tower windmill waterfall volcano tree flower forest river lake ocean wave cloud
storm rainbow moon sun star city village street market garden kitchen library temple""".split()
VERBS = """running walking flying swimming dancing jumping sleeping sitting reading playing
eating drinking singing laughing crying climbing falling floating spinning rolling sliding
driving sailing diving surfing skating painting cooking writing building burning melting
glowing shining sparkling drifting rising sinking exploding blooming growing shrinking
turning looking waving smiling fighting chasing hunting hiding searching watching""".split()
PLACES = """snow beach forest desert mountain valley canyon meadow field jungle swamp river
lake ocean sea island cave city street alley rooftop bridge station harbor market garden
park kitchen library museum temple castle palace ruins space planet moon clouds rain fog
storm sunset sunrise night dawn dusk winter summer autumn spring""".split()
STYLES = """cinematic realistic photorealistic detailed dramatic moody bright dark vivid
colorful pastel monochrome vintage retro futuristic dreamy surreal epic peaceful calm
chaotic gentle slow fast smooth sharp soft blurry glossy matte warm cool golden silver
neon watercolor oil sketch anime cartoon documentary aerial closeup wide handheld
tracking panning zooming static steady""".split()
ADJ = """red orange yellow green blue purple pink white black brown gray small big tiny huge
old young ancient modern wooden metal glass stone golden silver shiny dusty wet dry
frozen burning quiet noisy lonely happy sad angry curious sleepy brave""".split()
TEMPLATES = [
    "a {a} {s} {v} in the {p}, {t}, {t}.",
    "{t} shot of a {s} {v} near the {p}.",
    "the {a} {s} is {v} on a {a} {p} at {p}.",
    "two {s}s {v} together, {t} lighting, {a} colors.",
    "close up of a {a} {s}, {t}, slow motion.",
    "a {s} and a {s} {v} through the {p}, {t} camera.",
]


def corpus(path, lines, seed):
    r = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            t = r.choice(TEMPLATES)
            out = []
            i = 0
            while i < len(t):
                if t[i] == "{":
                    k = t[i + 1]
                    out.append(r.choice({"a": ADJ, "s": SUBJECTS, "v": VERBS, "p": PLACES,
                                         "t": STYLES}[k]))
                    i += 3
                else:
                    out.append(t[i])
                    i += 1
            f.write("".join(out) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "spiece-tiny.model")
    # The trainer records its input and output names in the model: it runs
    # in a scratch directory on plain names, so the file does not depend on
    # where the checkout is.
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            corpus("corpus.txt", 20000, 20261207)
            spm.SentencePieceTrainer.train(
                input="corpus.txt", model_prefix="spiece-tiny", model_type="unigram",
                vocab_size=320, num_threads=1, minloglevel=2, pad_id=0, eos_id=1, unk_id=2,
                bos_id=-1, normalization_rule_name="identity", input_sentence_size=0,
                shuffle_input_sentence=False, seed_sentencepiece_size=100000)
        finally:
            os.chdir(cwd)
        shutil.copyfile(os.path.join(tmp, "spiece-tiny.model"), out)
    print("wrote %s (%d bytes)" % (out, os.path.getsize(out)))


if __name__ == "__main__":
    main()
