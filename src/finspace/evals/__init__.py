"""The finance scoreboard: public answer keys (sets), their prompts and scorers, runs on the loaded model, the store."""
