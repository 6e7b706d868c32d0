"""Writing envs graded by checks or a judge: InstructionFollow-v0 (IFEval families, RLVR-IFeval) and OpenQA-v0."""
