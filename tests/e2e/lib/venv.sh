# Sourced by an e2e script that reads dtrain's files with a PyPI package (scripts/python_env.sh): venv_python
# MODULE... prints the .venv's python when it imports every MODULE, else fails (the script then skips).
venv_python() {
  local python="$source_dir/.venv/bin/python"
  [[ -x $python ]] || return 1
  local module
  for module in "$@"; do "$python" -c "import $module" 2>/dev/null || return 1; done
  echo "$python"
}
