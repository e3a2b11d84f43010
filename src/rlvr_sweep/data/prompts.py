"""The baseline's prompt template (baseline spec §1), shared by training and evaluation.

No chat template and no BOS: the rendered string is tokenised as is.
"""

PROMPT_TEMPLATE = (
    "You are a helpful math assistant.\n"
    "Answer the question and write the final result on a new line as:\n"
    "\\boxed{{ANSWER}}\n\n"
    "Question:\n{problem}\n\n"
    "Answer:"
)


def render_prompt(problem: str) -> str:
    """Fill the template; there is no trailing space or newline after ``Answer:``."""
    return PROMPT_TEMPLATE.format(problem=problem)


def encode_prompts(tokenizer, problems: list[str]) -> list[list[int]]:
    """Token ids of each rendered prompt (no special tokens added)."""
    return [tokenizer(render_prompt(p), add_special_tokens=False)["input_ids"] for p in problems]
