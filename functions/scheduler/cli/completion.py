"""``scheduler completion bash|zsh``: a shell completion script, derived from the parser itself
(so it cannot drift from the commands): ``eval "$(scheduler completion bash)"``. It completes
commands, options, and the values of options with a fixed set (``--type sqs``, ``--auth sigv4``)."""

from __future__ import annotations

import argparse
from typing import Any

from scheduler.cli.common import EXIT_OK

_BASH = r"""# scheduler completion (bash; zsh loads it through bashcompinit)
_scheduler_complete() {
    local cur prev path word i values
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    path=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        case "$word" in -*) continue ;; esac
        case " $(_scheduler_words "$path" commands) " in *" $word "*) path="${path:+$path }$word" ;; esac
    done
    if [[ "$prev" == -* ]]; then
        values="$(_scheduler_words "$path" "values $prev")"
        if [[ -n "$values" ]]; then
            COMPREPLY=($(compgen -W "$values" -- "$cur"))
            return
        fi
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_scheduler_words "$path" options)" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_scheduler_words "$path" commands)" -- "$cur"))
    fi
}
_scheduler_words() {
    case "$1|$2" in
%(cases)s
    esac
}
complete -F _scheduler_complete scheduler
"""

_ZSH_HEADER = "autoload -U +X bashcompinit && bashcompinit\n"


def command_tree(parser: argparse.ArgumentParser, path: str = "") -> dict[str, tuple[list[str], list[str]]]:
    """``{"jobs create": (subcommands, options), ...}`` of every (sub)parser, "" the top."""
    commands: list[str] = []
    options: list[str] = []
    tree: dict[str, tuple[list[str], list[str]]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                commands.append(name)
                tree.update(command_tree(child, f"{path} {name}".strip()))
        else:
            options.extend(s for s in action.option_strings if s.startswith("--"))
    tree[path] = (sorted(commands), sorted(set(options)))
    return tree


def option_values(parser: argparse.ArgumentParser, path: str = "") -> dict[tuple[str, str], list[str]]:
    """``{("jobs create", "--type"): ["http", ...], ...}``: the choices of every option that has some."""
    values: dict[tuple[str, str], list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                values.update(option_values(child, f"{path} {name}".strip()))
        elif action.choices and action.option_strings:
            for option in action.option_strings:  # -o as well as --output
                values[(path, option)] = [str(c) for c in action.choices]
    return values


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``shell`` (``bash`` or ``zsh``)."""
    cases = []
    for path, (commands, options) in sorted(command_tree(parser).items()):
        cases.append(f'        "{path}|commands") echo "{" ".join(commands)}" ;;')
        cases.append(f'        "{path}|options") echo "{" ".join(options)}" ;;')
    for (path, option), choices in sorted(option_values(parser).items()):
        cases.append(f'        "{path}|values {option}") echo "{" ".join(choices)}" ;;')
    body = _BASH % {"cases": "\n".join(cases)}
    return (_ZSH_HEADER + body) if shell == "zsh" else body


def run(args: argparse.Namespace) -> int:
    """Print the script."""
    print(script(args.root_parser, args.shell), end="")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """``scheduler completion``."""
    parser = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description='Print a shell completion script: eval "$(scheduler completion bash)" '
        "in ~/.bashrc, or the zsh form in ~/.zshrc.",
    )
    parser.add_argument("shell", choices=("bash", "zsh"), help="the shell")
    parser.set_defaults(func=run)
