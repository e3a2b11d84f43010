"""The baseline's prompt template (baseline spec §1), shared by training and evaluation.

No chat template and no BOS: the rendered string is tokenised as is.
"""

PROMPT_TEMPLATE = (
    "You are a helpful math assistant.\n"
    "Answer the question and write the final result on a new line as:\n"
    "\\boxed{ANSWER}\n\n"
    "Question:\n{problem}\n\n"
    "Answer:"
)


def render_prompt(problem: str, template: str | None = None) -> str:
    """Fill the template (the baseline's, or a task's own): `{problem}` is replaced by the problem, nothing
    else in it is read as a placeholder; there is no trailing space or newline after ``Answer:``."""
    return (template or PROMPT_TEMPLATE).replace("{problem}", problem)


def encode_prompts(tokenizer, problems: list[str], template: str | None = None) -> list[list[int]]:
    """Token ids of each rendered prompt (no special tokens added)."""
    return [tokenizer(render_prompt(p, template), add_special_tokens=False)["input_ids"] for p in problems]
