"""Operations (spec sections 4 and 5) as reviewed edits of a stack file."""
