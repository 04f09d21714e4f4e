"""
A LoRA adapter for SmolLM2-135M-Instruct that answers in French, trained on CPU in minutes.

  bash bench/adapters/french/setup.sh        # the venv, .cache/py-train (once)
  .cache/py-train/bin/python bench/adapters/french/train.py [--out .cache/adapters/smollm2-french]

The recipe: PEFT LoRA, rank 8, alpha 16, on the q, k, v, o, gate, up and down projections of all
30 blocks (what Switchyard's converter reads; no embeddings, lm_head, biases or DoRA), trained on
data.jsonl beside this file (English questions, short French answers, written for this recipe) with
SmolLM2's own chat template, the loss on the assistant's answer and its end token only.

The base weights are the served GGUF (Switchyard's models dir, Q4_1), read and dequantized by
transformers with gguf-py: the adapter learns on the very weights it is served beside.

The adapter is written with PEFT's save_pretrained, base_model_name_or_path set to the base's
catalog id. The output folder holds a stamp (the SHA-256 of data.jsonl and this file); a later run
with the same stamp trains nothing (--force trains again). Then the held-out prompts (heldout.jsonl)
are answered greedily by the trained model in PyTorch; try.ts beside this file asks them through
Switchyard.
"""

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BASE_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
STAMP = "recipe.sha256"


def recipe_hash() -> str:
    digest = hashlib.sha256()
    for name in ("data.jsonl", "train.py"):
        with open(os.path.join(HERE, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def default_gguf() -> str:
    models = os.environ.get("SWITCHYARD_MODELS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "switchyard", "models")
    found = sorted(glob.glob(os.path.join(models, BASE_ID.replace("/", "--"), "*.gguf")))
    if not found:
        sys.exit(f"no GGUF of {BASE_ID} under {models}: run 'node bin/switchyard.js models pull {BASE_ID}'")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, ".cache", "adapters", "smollm2-french"))
    parser.add_argument("--gguf", default=None, help="the base's GGUF (default: the one Switchyard pulled)")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--batch", type=int, default=BATCH)
    # One by default: on a machine shared with other work, torch's two threads meet at a barrier in
    # every operation and wait for each other's turn on a core (measured: steps 5-10 times slower).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--force", action="store_true", help="train even if the output's stamp matches")
    args = parser.parse_args()

    stamp = recipe_hash()
    stamp_path = os.path.join(args.out, STAMP)
    if not args.force and os.path.exists(stamp_path) and open(stamp_path).read().strip() == stamp:
        print(f"{args.out}: up to date (recipe {stamp[:12]})")
        return

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    started = time.time()

    gguf = args.gguf or default_gguf()
    folder, file = os.path.split(gguf)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    loaded = time.time()

    examples = [encode(tokenizer, json.loads(line)["messages"]) for line in open(os.path.join(HERE, "data.jsonl"), encoding="utf-8")]
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=TARGET_MODULES, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    model.peft_config["default"].base_model_name_or_path = BASE_ID
    model.print_trainable_parameters()

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    steps_per_epoch = (len(examples) + args.batch - 1) // args.batch
    total = steps_per_epoch * args.epochs
    # Linear warm-up over the first 5% of steps, then linear decay to zero.
    warmup = max(1, total // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (total - step) / max(1, total - warmup)))
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model.train()
    step = 0
    for epoch in range(args.epochs):
        order = list(range(len(examples)))
        random.shuffle(order)
        losses = []
        for start in range(0, len(order), args.batch):
            batch = [examples[i] for i in order[start : start + args.batch]]
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch])
            labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
            attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch])
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            step += 1
        print(f"epoch {epoch + 1}/{args.epochs}: mean loss {sum(losses) / len(losses):.3f} ({time.time() - loaded:.0f} s)", flush=True)
    trained = time.time()

    # Written beside the output, then moved into place: a stopped run leaves no half adapter.
    partial = args.out.rstrip("/") + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial, save_embedding_layers=False)
    with open(os.path.join(partial, "adapter_config.json")) as f:
        saved = json.load(f)
    assert saved["base_model_name_or_path"] == BASE_ID, saved["base_model_name_or_path"]
    with open(os.path.join(partial, STAMP), "w") as f:
        f.write(stamp + "\n")
    with open(os.path.join(partial, "training.json"), "w") as f:
        json.dump(
            {
                "base_gguf": gguf,
                "examples": len(examples),
                "epochs": args.epochs,
                "batch": args.batch,
                "lr": args.lr,
                "threads": args.threads,
                "load_s": round(loaded - started, 1),
                "train_s": round(trained - loaded, 1),
            },
            f,
            indent=2,
        )
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    os.rename(partial, args.out)
    print(f"wrote {args.out}: loading {loaded - started:.0f} s, training {trained - loaded:.0f} s on {args.threads} threads")

    model.eval()
    for line in open(os.path.join(HERE, "heldout.jsonl"), encoding="utf-8"):
        prompt = json.loads(line)["prompt"]
        ids = prompt_ids(tokenizer, [{"role": "user", "content": prompt}])
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=48, do_sample=False)
        print(f"  {prompt} -> {tokenizer.decode(out[0][len(ids):], skip_special_tokens=True)!r}")


# The recipe's hyperparameters (part of the stamp, as this file is).
EPOCHS = 3
LEARNING_RATE = 1e-3
BATCH = 8


def prompt_ids(tokenizer, messages) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])


def encode(tokenizer, messages) -> tuple[list[int], list[int]]:
    """The conversation's tokens, and its labels: -100 (no loss) up to the assistant's answer."""
    prompt = prompt_ids(tokenizer, messages[:-1])
    full = list(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])
    if full[: len(prompt)] != prompt:
        raise ValueError("the chat template renders the prompt differently with the answer after it")
    # The template ends the answer with <|im_end|> and a newline: learn the end token, not the newline.
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    last = len(full) - 1 - full[::-1].index(end)
    full = full[: last + 1]
    return full, [-100] * len(prompt) + full[len(prompt) :]


if __name__ == "__main__":
    main()
