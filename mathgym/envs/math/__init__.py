"""Math envs: MathReason-v0, MathStep-v0, MathTool-v0, Countdown-v0, the problem generator and the math data readers."""
