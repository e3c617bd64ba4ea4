"""SavedModel export for TF Serving: versioned directories, string and token-id signatures."""

from keras_transformer.export.saved_model import (
    IDS_SIGNATURE,
    SERVING_SIGNATURE,
    export_translator,
    next_version,
)

__all__ = ["IDS_SIGNATURE", "SERVING_SIGNATURE", "export_translator", "next_version"]
