"""The maths: the Naive Bayes event models, Robinson-Fisher, the fitted model, the decision rule, explanations, table models."""
