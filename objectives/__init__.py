"""The built-in objectives, one file each. Each registers through the
``electra_ablate.objectives`` entry-point group in pyproject.toml, exactly as a third-party
package would.

- ``bert_mlm``: BERT's masked language modelling (15% masked, 80/10/10);
- ``replace_mlm``: MLM whose selected tokens are replaced by a small generator's samples, not
  ``[MASK]``;
- ``all_tokens_mlm``: the identity of every token predicted, with a learned copy gate;
- ``electra_15``: ELECTRA with the discriminator's loss on the 15% masked positions only;
- ``electra``: replaced-token detection with a small generator, trained jointly;
- ``two_stage``: a generator trained with MLM first, then frozen while the discriminator trains;
- ``adversarial``: the generator trained with REINFORCE to fool the discriminator.
"""
