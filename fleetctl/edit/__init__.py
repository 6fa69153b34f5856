"""Operations (docs/operations.md) as reviewed edits of a stack file."""
