"""`python -m toolkit.train`: a run killed anywhere and resumed ends bit for bit where an
uninterrupted run ends; Ctrl-C saves first; evaluation keeps the best model and draws no
random numbers from training; a checkpoint from another run, and bad options, are refused
with the reason. Every run here is a real process on the built-in corpus; the table of bad
options goes through the command's own `main` in this process, since none of them trains."""

import argparse
import random
import signal
import subprocess
import sys

import pytest
import torch
from interruptions import TINY, differing_parameters, run, saved, single, stop_at

from toolkit.batching.data import load_data
from toolkit.learning.checkpoints import load_checkpoint
from toolkit.paths import EXAMPLES
from toolkit.scoring.metrics import bleu
from toolkit.search.decoding import translate
from toolkit.text.tokens import detokenize
from toolkit.train.command import main
from toolkit.train.run_evaluation import evaluation_sample
from toolkit.train.run_files import check_output
from toolkit.train.run_log import read_log
from toolkit.train.run_options import EXTRA_LEN
from toolkit.train.run_report import RunResult, report
from toolkit.train.run_state import Progress
from toolkit.train.world import World

STEPS = 60


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The reference: the whole run in one go."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    result = run(single("--output", str(folder), "--steps", str(STEPS), *TINY))
    assert result.returncode == 0, result.stderr
    assert f"checkpoint: {folder / 'last.pt'} (step {STEPS})" in result.stdout
    return folder


@pytest.mark.slow
def test_a_run_killed_at_a_random_step_resumes_to_the_same_bits(uninterrupted, tmp_path):
    """Fails if the resume loses Adam's moments, the schedule, the data position, the dropout
    stream, or takes a step twice; the paper recipe's dropout makes the random streams count."""
    kill_at = random.SystemRandom().randint(8, STEPS - 10)  # after the first save, at step 7
    options = ["--output", str(tmp_path), "--steps", str(STEPS), *TINY]
    killed = stop_at(single(*options), tmp_path, kill_at, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    reached = saved(tmp_path / "last.pt")["training"]["progress"]["step"]
    assert reached < STEPS, f"killed at step {kill_at}, yet the run had finished"
    resumed = run(single(*options, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming at step {reached + 1} of {STEPS}" in resumed.stdout
    assert differing_parameters(uninterrupted / "last.pt", tmp_path / "last.pt") == {}, \
        f"killed after step {kill_at}, resumed from step {reached}"
    # The log tells the run as if it never stopped: one row per step, the same losses.
    assert [r["loss"] for r in read_log(tmp_path / "log.csv")] == \
        [r["loss"] for r in read_log(uninterrupted / "log.csv")]


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_the_resumed_run_ends_the_same(uninterrupted, tmp_path):
    options = ["--output", str(tmp_path), "--steps", str(STEPS), *TINY]
    stopped = stop_at(single(*options), tmp_path, 12, signal.SIGINT)
    assert stopped.returncode == 128 + signal.SIGINT, stopped.stderr
    step = saved(tmp_path / "last.pt")["training"]["progress"]["step"]
    assert f"stopped by SIGINT after step {step}" in stopped.stdout
    assert 12 <= step < STEPS  # saved where the signal stopped it (--save-every is 7)
    assert run(single(*options, "--resume")).returncode == 0
    assert differing_parameters(uninterrupted / "last.pt", tmp_path / "last.pt") == {}


@pytest.mark.slow
def test_evaluating_more_often_changes_no_training_step(uninterrupted, tmp_path):
    """Fails if evaluation moves a random stream training reads, or leaves the model in eval
    mode (no dropout)."""
    options = ["--output", str(tmp_path), "--steps", str(STEPS), *TINY, "--eval-every", "3"]
    assert run(single(*options)).returncode == 0
    assert differing_parameters(uninterrupted / "last.pt", tmp_path / "last.pt") == {}
    evaluations = [r for r in read_log(tmp_path / "log.csv") if r["val_bleu"] is not None]
    assert [r["step"] for r in evaluations] == list(range(3, STEPS + 1, 3))


@pytest.mark.slow
def test_best_pt_holds_the_model_with_the_best_logged_bleu(uninterrupted):
    rows = [r for r in read_log(uninterrupted / "log.csv") if r["val_bleu"] is not None]
    best = max(rows, key=lambda r: r["val_bleu"])
    progress = saved(uninterrupted / "last.pt")["training"]["progress"]
    assert progress["best_step"] == best["step"]
    assert progress["best_bleu"] == pytest.approx(best["val_bleu"], abs=0.005)  # log: 2 decimals
    # Translating the same validation sample with best.pt gives that BLEU again.
    restored = load_checkpoint(uninterrupted / "best.pt")
    data = load_data()
    sample = evaluation_sample(data, 10, seed=0)
    sources, references = data.sources("validation"), data.reference_texts("validation")
    hypotheses = translate(restored.model, [sources[i] for i in sample], restored.src_vocab,
                           restored.tgt_vocab)
    assert bleu([detokenize(words) for words in hypotheses],
                [references[i] for i in sample]).score == pytest.approx(
        progress["best_bleu"], abs=1e-9)
    assert (uninterrupted / "chart.png").stat().st_size > 10_000


@pytest.mark.slow
def test_patience_stops_a_run_that_no_longer_improves(tmp_path):
    # A learning rate of 1e-12 leaves the translations, and so BLEU, where they are.
    result = run(single("--output", str(tmp_path), "--steps", "100", *TINY, "--lr", "1e-12",
                        "--eval-every", "5", "--patience", "2"))
    assert result.returncode == 0, result.stderr
    assert "stopped early: 2 evaluations without a better BLEU" in result.stdout
    assert read_log(tmp_path / "log.csv")[-1]["step"] == 15  # best at 5, then 10 and 15


@pytest.mark.slow
def test_bf16_autocast_trains_on_cpu_with_float32_weights(tmp_path):
    result = run(single("--output", str(tmp_path), "--steps", "40", *TINY, "--precision", "bf16",
                        "--warmup-steps", "5", "--lr", "3e-3"))
    assert result.returncode == 0, result.stderr
    losses = [r["loss"] for r in read_log(tmp_path / "log.csv")]
    assert all(map(torch.isfinite, torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.9 * sum(losses[:5]) / 5  # from 6.1 to about 5.2
    weights = saved(tmp_path / "last.pt")["state_dict"]
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float32}


@pytest.mark.slow
@pytest.mark.parametrize(("change", "named"), [
    (["--embed-dim", "32"], "--embed-dim: the checkpoint has 16, this run 32"),
    (["--tokenizer", "bpe", "--vocab-size", "200"], "--tokenizer: the checkpoint has 'word'"),
    (["--train-pairs", "200"], "--train-pairs: the checkpoint has 300, this run 200"),
])
def test_a_checkpoint_from_another_run_is_refused_with_what_differs(
        uninterrupted, tmp_path, change, named):
    (tmp_path / "last.pt").write_bytes((uninterrupted / "last.pt").read_bytes())
    result = run(single("--output", str(tmp_path), "--steps", str(STEPS + 5), *TINY, *change,
                        "--resume"))
    assert result.returncode == 2
    assert "is from another run, so it cannot be resumed" in result.stderr
    assert named in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_changed_corpus_file_is_refused_even_with_the_same_options(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = [f'{{"translation": {{"en": "the dog {i} sleeps .", "de": "der Hund {i} schläft ."}}}}'
            for i in range(400)]
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    options = ["--output", str(tmp_path / "run"), "--corpus", str(corpus), "--steps", "3", *TINY]
    assert run(single(*options)).returncode == 0
    # The same words, so the same vocabularies: only one pair's word order changes.
    rows[0] = rows[0].replace("der Hund 0 schläft", "schläft der Hund 0")
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = run(single(*options[:5], "6", *TINY, "--resume"))
    assert result.returncode == 2
    assert "the corpus gives other training pairs or vocabularies" in result.stderr


@pytest.mark.slow
def test_a_finished_run_is_never_overwritten_and_resume_needs_a_checkpoint(
        uninterrupted, tmp_path):
    again = run(single("--output", str(uninterrupted), *TINY))
    assert again.returncode != 0 and "add --resume" in again.stderr
    nothing = run(single("--output", str(tmp_path), *TINY, "--resume"))
    assert nothing.returncode != 0 and "no checkpoint at" in nothing.stderr


@pytest.mark.slow
def test_a_run_killed_before_its_first_save_can_start_over(uninterrupted, tmp_path):
    """It leaves log.csv and no last.pt: --resume says to start over, and starting over
    clears what it left and ends where a run that never stopped ends."""
    options = ["--output", str(tmp_path), "--steps", str(STEPS), *TINY]
    killed = stop_at(single(*options, "--save-every", "1000"), tmp_path, 3, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    assert (tmp_path / "log.csv").exists() and not (tmp_path / "last.pt").exists()
    resumed = run(single(*options, "--resume"))
    assert resumed.returncode != 0
    assert "stopped before its first checkpoint" in resumed.stderr
    assert "without --resume to start over" in resumed.stderr
    again = run(single(*options))
    assert again.returncode == 0, again.stderr
    assert "starting over, replacing them" in again.stderr
    assert [row["step"] for row in read_log(tmp_path / "log.csv")] == list(range(1, STEPS + 1))
    assert differing_parameters(uninterrupted / "last.pt", tmp_path / "last.pt") == {}


@pytest.mark.parametrize(("files", "cleared"), [
    (["log.csv", "chart.png", "step-00000200.pt"], True),  # killed while writing its first save
    (["log.csv", "step-00000200.pt", "step-00000400.pt"], False),  # last.pt moved away
    (["log.csv", "best.pt"], False),
])
def test_only_what_a_run_writes_before_its_first_save_is_cleared(tmp_path, files, cleared):
    for name in files:
        (tmp_path / name).write_text("x", encoding="utf-8")
    fresh, resume = (argparse.Namespace(output=tmp_path, resume=flag) for flag in (False, True))
    with pytest.raises(SystemExit) as refusal:
        check_output(resume)
    assert ("start over" in str(refusal.value.code)) == cleared  # never advice that is refused
    if cleared:
        check_output(fresh)
        assert list(tmp_path.iterdir()) == []
    else:
        with pytest.raises(SystemExit, match="holds another run's files"):
            check_output(fresh)
        assert sorted(path.name for path in tmp_path.iterdir()) == sorted(files)


def test_the_report_names_only_the_files_the_run_wrote(tmp_path):
    (tmp_path / "log.csv").write_text("step\n", encoding="utf-8")
    args = argparse.Namespace(output=tmp_path, patience=None)
    result = RunResult(None, None, Progress(), 0, 0, 1.0)
    lines = "\n".join(report(result, args, World(device=torch.device("cpu"))))
    assert f"log: {tmp_path / 'log.csv'}" in lines
    assert "last.pt" not in lines and "chart.png" not in lines


@pytest.mark.parametrize(("options", "message"), [
    (["--num-heads", "3"], "--embed-dim 16 is not divisible by --num-heads 3"),
    (["--dropout", "1.5"], "--dropout must be in [0, 1)"),
    (["--tie-embeddings", "all"], "--tie-embeddings all needs --shared-vocab"),
    (["--tokenizer", "sentencepiece"], "invalid choice: 'sentencepiece'"),
    (["--corpus", "/no/such/corpus.jsonl"], "no corpus file or folder at /no/such/corpus.jsonl"),
    (["--batch-size", "400"], "300 training pairs do not fill one step of 400 pairs"),
    (["--max-len", "250"], "--max-len 250 leaves no room in --max-seq-len 256"),
    (["--epochs", "1e-8"], "--epochs 1e-08 is less than one of the 37 steps an epoch takes"),
])
def test_bad_options_are_refused_before_training_with_a_message(tmp_path, options, message,
                                                                capsys):
    try:  # a refusal by argparse exits; one found while setting up the run returns its code
        code = main(["--output", str(tmp_path / "run"), *TINY, *options])
    except SystemExit as refusal:
        code = refusal.code
    assert code == 2  # any other exception fails this test with its stack trace
    assert message in capsys.readouterr().err
    assert not any((tmp_path / "run").glob("*")), "a refused run wrote files"


@pytest.mark.slow
def test_an_output_folder_that_cannot_be_written_is_refused_first(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = run(single("--output", str(blocker / "run"), *TINY))
    assert result.returncode != 0 and "cannot be written" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_device_that_is_not_there_is_named():
    result = run(single("--device", "cuda", *TINY))
    assert result.returncode != 0
    assert "--device cuda: no CUDA device is available here" in result.stderr


@pytest.mark.slow
def test_help_explains_every_option():
    text = subprocess.run(single("--help"), capture_output=True, text=True, check=True).stdout
    for option in ("--corpus", "--tokenizer", "--vocab-size", "--max-tokens", "--device",
                   "--precision", "--resume", "--eval-every", "--patience", "--recipe"):
        assert option in text


@pytest.mark.slow
def test_translate_keeps_every_line_in_place(uninterrupted):
    # A byte-order mark first (as some editors save UTF-8), a blank line, an unknown word, a
    # source that fills the positions but for one (its translation is cut at the last), and
    # one longer than the positions.
    lines = ("\ufeffThe dog sees the cat.\n\nThe zebra sleeps.\n" + "dog " * 254 + "\n"
             + "dog " * 300 + "\n")
    result = subprocess.run([sys.executable, "-m", "toolkit.translate",
                             str(uninterrupted / "best.pt")], input=lines,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    output = result.stdout.split("\n")
    assert len(output) == 6 and output[5] == ""  # five lines in, five out (and the last \n)
    assert output[0] and output[1] == "" and output[2] and output[3] and output[4] == ""
    assert "line 1" not in result.stderr  # the mark is not read as a word
    assert "line 3: words not in the vocabulary, read as <unk>: zebra" in result.stderr
    assert "line 4" not in result.stderr
    assert ("line 5: 301 source tokens leave no room for a translation in the model's 256 "
            "positions") in result.stderr


@pytest.mark.slow
def test_translate_says_what_is_wrong_with_a_checkpoint(tmp_path):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    result = subprocess.run([sys.executable, "-m", "toolkit.translate", str(broken), "Hello."],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "is not a readable checkpoint" in result.stderr
    assert "Traceback" not in result.stderr


def test_translate_given_a_sentence_where_the_checkpoint_goes_says_so(capsys):
    import toolkit.translate as command
    assert command.main(["The dog sleeps."]) == 2
    error = capsys.readouterr().err
    assert "'The dog sleeps.' is not a checkpoint file: the first argument is the model" in error


@pytest.mark.slow
def test_translate_says_when_the_model_wrote_no_word(uninterrupted, monkeypatch, capsys):
    """An undertrained model says <eos> first: an empty line, and a note on why."""
    import toolkit.translate as command
    monkeypatch.setattr(command, "translate", lambda model, sentences, *args: [
        [] if sentence.startswith("The cat") else ["Hund"] for sentence in sentences])
    assert command.main([str(uninterrupted / "best.pt"), "The dog sleeps.", "The cat sleeps."]) == 0
    out, err = capsys.readouterr()
    assert out.split("\n")[:2] == ["Hund", ""]
    assert "line 2: the model wrote no word (it said <eos> first)" in err
    assert "line 1" not in err


@pytest.mark.slow
def test_translate_decodes_with_the_beam_it_is_given(uninterrupted):
    """The paper's beam search by default, greedy with --beam-size 1; a bad beam is refused."""
    saved = load_checkpoint(uninterrupted / "best.pt")
    sentences = ["The dog sees the cat.", "A big king does not sleep.", "Today the man sings."]
    for options, beam_size in [([], 4), (["--beam-size", "1"], 1)]:
        result = subprocess.run([sys.executable, "-m", "toolkit.translate",
                                 str(uninterrupted / "best.pt"), *options, *sentences],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        expected = translate(saved.model, sentences, saved.src_vocab, saved.tgt_vocab,
                             extra_len=EXTRA_LEN, beam_size=beam_size)
        assert result.stdout.splitlines() == [detokenize(words) for words in expected]
    refused = subprocess.run([sys.executable, "-m", "toolkit.translate",
                              str(uninterrupted / "best.pt"), "--beam-size", "0", "Hello."],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--beam-size must be at least 1, got 0" in refused.stderr


@pytest.mark.slow
def test_translate_hands_its_beam_and_alpha_to_the_search(uninterrupted, monkeypatch, capsys):
    """The outputs above may agree for beams 1 and 4 on a few sentences; the options must still
    reach the decoder."""
    import toolkit.translate as command

    asked = []

    def spy(model, sentences, *args, **kwargs):
        asked.append(args[-2:])  # (beam_size, length_penalty)
        return [[] for _ in sentences]

    monkeypatch.setattr(command, "translate", spy)
    checkpoint = str(uninterrupted / "best.pt")
    assert command.main([checkpoint, "Hello."]) == 0
    assert command.main([checkpoint, "--beam-size", "3", "--length-penalty", "1.5", "Hi."]) == 0
    assert asked == [(4, 0.6), (3, 1.5)]
    capsys.readouterr()


@pytest.mark.slow
def test_average_last_after_a_stop_before_any_kept_step_says_so_and_succeeds(tmp_path):
    """Early stopping can end a run before its first --save-every step: nothing to average,
    which is worth a note, not a failed run."""
    result = run(single(*TINY, "--steps", "40", "--eval-every", "1", "--patience", "1",
                        "--save-every", "50", "--average-last", "2",
                        "--output", str(tmp_path / "run")))
    assert result.returncode == 0, result.stderr
    assert "no step-N.pt was kept before the run ended at step" in result.stderr
    assert (tmp_path / "run" / "last.pt").exists()
    assert not (tmp_path / "run" / "averaged.pt").exists()


@pytest.mark.slow
def test_best_pt_is_written_after_the_last_pt_of_its_step(tmp_path, monkeypatch):
    """Killed between the two, a run resumes from a last.pt that already names that step
    best, and writes best.pt again from it; the other order could leave a best.pt that the
    resumed run's record does not know."""
    from toolkit.train import command as train_command
    from toolkit.train import training_run

    written = []
    original = training_run.save_checkpoint
    monkeypatch.setattr(training_run, "save_checkpoint",
                        lambda path, *a, **k: written.append(path.name) or original(path, *a, **k))
    assert train_command.main([*TINY, "--steps", "20", "--eval-every", "5",
                               "--output", str(tmp_path / "run")]) == 0
    bests = [i for i, name in enumerate(written) if name == "best.pt"]
    assert bests and all(i > 0 and written[i - 1] == "last.pt" for i in bests)


@pytest.mark.slow
def test_a_chinese_corpus_goes_through_end_to_end_as_text(tmp_path):
    """From a folder of TSV files through BPE, training, BLEU with the Chinese tokeniser and
    the translate command: a sentence the model learnt comes back with its own punctuation
    (full-width quotes and question mark, no space anywhere)."""
    trained = run(single("--corpus", str(EXAMPLES / "en-zh"), "--tgt-lang", "zh",
                         "--tokenizer", "bpe", "--vocab-size", "150", "--steps", "400",
                         "--batch-size", "16", "--warmup-steps", "100", "--eval-every", "100",
                         "--output", str(tmp_path)))
    assert trained.returncode == 0, trained.stderr
    assert "tok:zh" in trained.stdout and "on 6 validation sentences" in trained.stdout
    translated = run([sys.executable, "-m", "toolkit.translate", str(tmp_path / "last.pt"),
                      '"Where is the dog?" asked the girl.', "The zebra sleeps."])
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout.splitlines()[0] == "“狗在哪里？”女孩问。"
    assert "line 2: characters not in the vocabulary, read as <unk>: z" in translated.stderr
