import { Forbidden } from "../errors.js";
import type { Principal } from "../protocol/principal.js";

/**
 * What creating, scaling and deleting deployments and uploading and deleting adapters need (they
 * spend the machine's memory): a key with the manage-deployments right; else a 403. `what`: what
 * the refusal says the key cannot manage.
 */
export function mayManageDeployments(what: string): (caller: Principal) => void {
  return (caller) => {
    if (!caller.manageDeployments) {
      throw new Forbidden(
        `This API key cannot manage ${what}. Use a key of this account created with the manage-deployments right.`,
        "missing_manage_deployments_right",
      );
    }
  };
}
